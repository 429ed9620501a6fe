/**
 * Start-up checks of the mesh flags: SMG's (a name that is non-empty and has no ':', an
 * advertised address that is never unspecified) with SMG's messages, well-formed `host:port`
 * peers (hostnames allowed, unlike SMG), mTLS paths all or none, and sane timing.
 */

import { atLeast } from "./checks.ts";
import { badValue, ConfigError } from "../core/errors.ts";
import type { GatewayConfig } from "./config.ts";

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

/** Throws the first problem in the mesh flags (only when the mesh is on); normalises `c.mesh`. */
export function validateMesh(c: GatewayConfig): void {
  const m = c.mesh;
  if (!m.enabled) return;
  if (m.serverName !== null && (m.serverName.trim() === "" || m.serverName.includes(":"))) {
    throw badValue(
      "--mesh-server-name",
      m.serverName,
      "must be non-empty and must not contain ':'",
    );
  }
  if (!Number.isInteger(m.port) || m.port < 1 || m.port > 65535) {
    throw badValue("--mesh-port", m.port, "allowed: 1..65535");
  }
  if (m.host.trim() === "") throw badValue("--mesh-host", m.host, "must not be empty");
  // A raw IPv6 address (a pod's $(POD_IP) on an IPv6 cluster) is taken in brackets, as every
  // host:port of the mesh writes it.
  const bracket = (h: string) => (h.includes(":") && !h.startsWith("[") ? `[${h}]` : h);
  m.host = bracket(m.host.trim());
  if (m.advertiseHost !== null) m.advertiseHost = bracket(m.advertiseHost.trim());
  const advertise = m.advertiseHost ?? m.host;
  if (isUnspecified(advertise)) {
    throw new ConfigError(
      `--mesh-advertise-host: mesh advertise address cannot be unspecified ('${advertise}'); ` +
        "set --mesh-advertise-host to a routable node IP",
    );
  }
  if (!parseHostPort(`${advertise}:${m.port}`)) {
    throw badValue("--mesh-advertise-host", advertise, "expected an IP address or a host name");
  }
  m.peerUrls = m.peerUrls.map((u) => {
    if (!parseHostPort(u)) {
      throw badValue("--mesh-peer-urls", u, "expected host:port, e.g. 10.0.0.1:39527 (no scheme)");
    }
    return u.trim();
  });
  const tls = [m.tlsCaCert, m.tlsCert, m.tlsKey];
  if (tls.some((x) => x !== null) && tls.some((x) => x === null)) {
    throw new ConfigError(
      "--mesh-tls-ca-cert, --mesh-tls-cert and --mesh-tls-key: give all three for mTLS, or none",
    );
  }
  atLeast("--mesh-probe-interval-ms", m.probeIntervalMs, 10);
  atLeast("--mesh-probe-timeout-ms", m.probeTimeoutMs, 1);
  if (m.probeTimeoutMs >= m.probeIntervalMs) {
    throw badValue(
      "--mesh-probe-timeout-ms",
      m.probeTimeoutMs,
      "must be below --mesh-probe-interval-ms",
    );
  }
  atLeast("--mesh-indirect-checks", m.indirectChecks, 0);
  atLeast("--mesh-suspicion-mult", m.suspicionMult, 1);
  atLeast("--mesh-suspicion-max-timeout-mult", m.suspicionMaxTimeoutMult, 1);
  atLeast("--mesh-retransmit-mult", m.retransmitMult, 1);
  atLeast("--mesh-awareness-max-multiplier", m.awarenessMaxMultiplier, 1);
  atLeast("--mesh-push-pull-interval-secs", m.pushPullIntervalSecs, 0);
  atLeast("--mesh-reconnect-interval-secs", m.reconnectIntervalSecs, 0);
  atLeast("--mesh-reap-secs", m.reapSecs, 1);
  atLeast("--mesh-broadcast-timeout-ms", m.broadcastTimeoutMs, 1);
  atLeast("--mesh-join-backoff-ms", m.joinBackoffMs, 1);
  atLeast("--mesh-join-max-backoff-secs", m.joinMaxBackoffSecs, 1);
  atLeast("--mesh-reconnect-timeout-secs", m.reconnectTimeoutSecs, 0);
  atLeast("--mesh-max-piggyback", m.maxPiggyback, 1);
  atLeast("--mesh-max-members", m.maxMembers, 2);
  atLeast("--mesh-heartbeat-secs", m.heartbeatSecs, 1);
  atLeast("--mesh-stream-queue-size", m.streamQueueSize, 1);
  if (!(m.streamIdleTimeoutSecs > m.heartbeatSecs)) {
    throw badValue(
      "--mesh-stream-idle-timeout-secs",
      m.streamIdleTimeoutSecs,
      "must be above --mesh-heartbeat-secs",
    );
  }
}
