/**
 * Host and port helpers (the mesh flags, the mesh core): `host:port` parsing (hostnames allowed, unlike SMG;
 * IPv6 in brackets) and the unspecified address, which a router must never advertise.
 */

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/;

/** Parses `host:port` (IPv6 in brackets); null when malformed. */
export function parseHostPort(s: string): { host: string; port: number } | null {
  const m = HOST_PORT.exec(s.trim());
  if (!m) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1], port } : null;
}

/** Whether `host` is the unspecified address (0.0.0.0 or ::). */
export function isUnspecified(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "0.0.0.0" || (/^[0:]+$/.test(h) && h.includes(":"));
}
