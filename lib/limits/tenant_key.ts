/**
 * SMG's canonical tenant keys: `auth:<id>` (a client key's tenant), `header:<id>` (the trusted
 * tenant header), `ip:<address>` (the client's address, as Rust prints it) and `anonymous`; and
 * the check that a configured key is one a request can resolve to.
 */

/** An IPv4 address as Rust prints it (four decimals, no leading zeros), or null. */
function ipv4(s: string): number[] | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > 255) return null;
    out.push(Number(p));
  }
  return out;
}

/** The eight 16-bit groups of an IPv6 address (an IPv4 tail allowed), or null. */
function ipv6Groups(s: string): number[] | null {
  let text = s;
  if (s.includes(".")) {
    const at = s.lastIndexOf(":");
    const v4 = at < 0 ? null : ipv4(s.slice(at + 1));
    if (!v4) return null;
    const hi = ((v4[0] << 8) | v4[1]).toString(16);
    const lo = ((v4[2] << 8) | v4[3]).toString(16);
    text = `${s.slice(0, at + 1)}${hi}:${lo}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parse = (h: string) => (h === "" ? [] : h.split(":"));
  const head = parse(halves[0]);
  const tail = halves.length === 2 ? parse(halves[1]) : [];
  const groups: number[] = [];
  for (const g of [...head, ...tail]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    groups.push(parseInt(g, 16));
  }
  const missing = 8 - groups.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const zeros = Array<number>(halves.length === 2 ? missing : 0).fill(0);
  return [...groups.slice(0, head.length), ...zeros, ...groups.slice(head.length)];
}

/**
 * An IPv6 address printed as RFC 5952 (and Rust) do: lower-case hex without leading zeros, the
 * longest run of two or more zero groups (the first of equals) as `::`, and an IPv4-mapped
 * address as `::ffff:a.b.c.d`.
 */
function printIpv6(g: number[]): string {
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) {
    return `::ffff:${g[6] >> 8}.${g[6] & 255}.${g[7] >> 8}.${g[7] & 255}`;
  }
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

/** The canonical form of an IP address (brackets allowed around IPv6), or null if it is none. */
export function canonicalIp(raw: string): string | null {
  const s = raw.startsWith("[") && raw.endsWith("]") ? raw.slice(1, -1) : raw;
  const v4 = ipv4(s);
  if (v4) return v4.join(".");
  const v6 = s.includes(":") ? ipv6Groups(s) : null;
  return v6 ? printIpv6(v6) : null;
}

/**
 * Whether `key` is a tenant key a request can resolve to: `anonymous`, `auth:` or `header:` with
 * an id (a header's id: trimmed, printable ASCII or tab, as a header value decodes), or `ip:`
 * with an address in its canonical form.
 */
export function isCanonicalTenantKey(key: string): boolean {
  if (key === "anonymous") return true;
  if (key.startsWith("auth:")) return key.length > 5;
  if (key.startsWith("header:")) {
    const id = key.slice(7);
    return id !== "" && id.trim() === id && /^[\t\x20-\x7e]+$/.test(id);
  }
  if (key.startsWith("ip:")) return canonicalIp(key.slice(3)) === key.slice(3);
  return false;
}
