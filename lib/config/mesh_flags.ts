/**
 * The HA mesh's flags for the gateway's flag table (`flags.ts`): SMG's names and defaults
 * (`--enable-mesh`, `--mesh-server-name`, `--mesh-host`, `--mesh-advertise-host`,
 * `--mesh-port`, `--mesh-peer-urls`, the mTLS paths), then the SWIM timing, which SMG hard-codes
 * and we expose with the same values as defaults.
 */

import type { MeshConfig } from "./config.ts";
import type { FlagSpec } from "./flags.ts";

type NumKey = {
  [K in keyof MeshConfig]: MeshConfig[K] extends number ? K : never;
}[keyof MeshConfig];

function timing(name: string, key: NumKey, help: string, kind: "int" | "float" = "int"): FlagSpec {
  return {
    name,
    kind,
    help,
    apply: (c, v) => (c.mesh[key] = v),
    shown: (d) => d.mesh[key],
  };
}

/** The mesh flags, in --help order. */
export const MESH_FLAGS: FlagSpec[] = [
  {
    name: "enable-mesh",
    kind: "bool",
    help: "join other routers in a high-availability mesh",
    apply: (c, v) => (c.mesh.enabled = v),
  },
  {
    name: "mesh-server-name",
    kind: "string",
    help: "this router's unique mesh name, no ':' (default: Mesh_ + 4 random characters)",
    apply: (c, v) => (c.mesh.serverName = v),
  },
  {
    name: "mesh-host",
    kind: "string",
    help: "mesh bind address",
    apply: (c, v) => (c.mesh.host = v),
    shown: (d) => d.mesh.host,
  },
  {
    name: "mesh-advertise-host",
    kind: "string",
    help: "address other routers dial (default: --mesh-host; never 0.0.0.0)",
    apply: (c, v) => (c.mesh.advertiseHost = v),
  },
  {
    name: "mesh-port",
    kind: "int",
    help: "mesh port, bound and advertised",
    apply: (c, v) => (c.mesh.port = v),
    shown: (d) => d.mesh.port,
  },
  {
    name: "mesh-peer-urls",
    kind: "list",
    help: "routers to join through, host:port; all are tried, with backoff",
    apply: (c, v) => (c.mesh.peerUrls = v),
  },
  {
    name: "mesh-tls-ca-cert",
    kind: "string",
    help: "PEM CA that signs every router's certificate (mTLS with the next two)",
    apply: (c, v) => (c.mesh.tlsCaCert = v),
  },
  {
    name: "mesh-tls-cert",
    kind: "string",
    help: "PEM certificate of this router",
    apply: (c, v) => (c.mesh.tlsCert = v),
  },
  {
    name: "mesh-tls-key",
    kind: "string",
    help: "PEM private key of this router",
    apply: (c, v) => (c.mesh.tlsKey = v),
  },
  timing("mesh-probe-interval-ms", "probeIntervalMs", "time between SWIM probe rounds"),
  timing("mesh-probe-timeout-ms", "probeTimeoutMs", "direct-ping timeout before asking others"),
  timing("mesh-indirect-checks", "indirectChecks", "peers asked to ping-req a silent member"),
  timing("mesh-suspicion-mult", "suspicionMult", "suspicion lasts mult × log10(N) probe intervals"),
  timing(
    "mesh-suspicion-max-timeout-mult",
    "suspicionMaxTimeoutMult",
    "unconfirmed suspicions last this many times longer",
  ),
  timing("mesh-retransmit-mult", "retransmitMult", "piggyback sends = mult × log10(N + 1)"),
  timing(
    "mesh-awareness-max-multiplier",
    "awarenessMaxMultiplier",
    "local-health ceiling on timeout stretching (1 is off)",
  ),
  timing("mesh-push-pull-interval-secs", "pushPullIntervalSecs", "full-state exchange; 0 off"),
  timing("mesh-reconnect-interval-secs", "reconnectIntervalSecs", "retry one DOWN member; 0 off"),
  timing("mesh-reap-secs", "reapSecs", "forget DOWN and LEAVING members after this"),
  timing(
    "mesh-broadcast-timeout-ms",
    "broadcastTimeoutMs",
    "wait for acks of broadcasts and leave",
  ),
  timing("mesh-join-backoff-ms", "joinBackoffMs", "first seed retry delay, doubling"),
  timing("mesh-join-max-backoff-secs", "joinMaxBackoffSecs", "cap on the seed retry backoff"),
  timing(
    "mesh-reconnect-timeout-secs",
    "reconnectTimeoutSecs",
    "keep retrying forgotten members and seeds this long (partitions heal)",
  ),
  timing("mesh-max-piggyback", "maxPiggyback", "membership updates piggybacked per message"),
  timing("mesh-max-members", "maxMembers", "members a router keeps at most"),
  timing("mesh-heartbeat-secs", "heartbeatSecs", "heartbeat an idle sync stream after this"),
  timing("mesh-stream-idle-timeout-secs", "streamIdleTimeoutSecs", "close a silent sync stream"),
  timing("mesh-stream-queue-size", "streamQueueSize", "frames a stream direction may queue"),
];
