/**
 * The HA mesh's flags, declared once (see `flag.ts`): SMG's names and defaults (`--enable-mesh`,
 * `--mesh-server-name`, `--mesh-host`, `--mesh-advertise-host`, `--mesh-port`,
 * `--mesh-peer-urls`, the mTLS paths), then the SWIM timing, which SMG hard-codes and we expose
 * with the same values as defaults. They are checked only with the mesh on (as SMG); the checks
 * that join several of them are in `validate.ts`.
 */

import { badValue } from "../core/errors.ts";
import { atLeast, dialPort, must, nonEmpty } from "./checks.ts";
import type { Check, Flags } from "./flag.ts";
import { bool, int, list, str } from "./kinds.ts";
import type { MeshConfig } from "./types.ts";
import { parseHostPort } from "../core/host_port.ts";

/** A host as every mesh `host:port` writes it: trimmed, a raw IPv6 address in brackets. */
const meshHost: Check<string> = (_, v) => {
  const h = v.trim();
  return h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
};

/** `host:port` seeds, trimmed. */
const peerUrls: Check<string[]> = (flag, urls) =>
  urls.map((u) => {
    if (!parseHostPort(u)) {
      throw badValue(flag, u, "expected host:port, e.g. 10.0.0.1:39527 (no scheme)");
    }
    return u.trim();
  });

/** The mesh flags, in --help order. */
export const MESH_FLAGS: Flags<MeshConfig> = {
  enabled: {
    name: "enable-mesh",
    kind: bool,
    default: false,
    help: "join other routers in a high-availability mesh",
  },
  serverName: {
    name: "mesh-server-name",
    kind: str,
    default: null,
    help: "this router's unique mesh name, no ':' (default: Mesh_ + 4 random characters)",
    check: must(
      (v) => v.trim() !== "" && !v.includes(":"),
      "must be non-empty and must not contain ':'",
    ),
  },
  host: {
    name: "mesh-host",
    kind: str,
    default: "0.0.0.0",
    help: "mesh bind address",
    // An IPv6 pod's $(POD_IP) is taken in brackets.
    check: (flag, v) => meshHost(flag, nonEmpty(flag, v)),
  },
  advertiseHost: {
    name: "mesh-advertise-host",
    kind: str,
    default: null,
    help: "address other routers dial (default: --mesh-host; never 0.0.0.0)",
    check: meshHost,
  },
  port: {
    name: "mesh-port",
    kind: int,
    default: 39527,
    help: "mesh port, bound and advertised",
    check: dialPort,
  },
  peerUrls: {
    name: "mesh-peer-urls",
    kind: list,
    default: [],
    help: "routers to join through, host:port; all are tried, with backoff",
    check: peerUrls,
  },
  tlsCaCert: {
    name: "mesh-tls-ca-cert",
    kind: str,
    default: null,
    help: "PEM CA that signs every router's certificate (mTLS with the next two)",
  },
  tlsCert: {
    name: "mesh-tls-cert",
    kind: str,
    default: null,
    help: "PEM certificate of this router",
  },
  tlsKey: {
    name: "mesh-tls-key",
    kind: str,
    default: null,
    help: "PEM private key of this router",
  },
  probeIntervalMs: {
    name: "mesh-probe-interval-ms",
    kind: int,
    default: 1000,
    help: "time between SWIM probe rounds",
    check: atLeast(10),
  },
  probeTimeoutMs: {
    name: "mesh-probe-timeout-ms",
    kind: int,
    default: 500,
    help: "direct-ping timeout before asking others",
    check: atLeast(1),
  },
  indirectChecks: {
    name: "mesh-indirect-checks",
    kind: int,
    default: 3,
    help: "peers asked to ping-req a silent member",
    check: atLeast(0),
  },
  suspicionMult: {
    name: "mesh-suspicion-mult",
    kind: int,
    default: 4,
    help: "suspicion lasts mult × log10(N) probe intervals",
    check: atLeast(1),
  },
  suspicionMaxTimeoutMult: {
    name: "mesh-suspicion-max-timeout-mult",
    kind: int,
    default: 6,
    help: "unconfirmed suspicions last this many times longer",
    check: atLeast(1),
  },
  retransmitMult: {
    name: "mesh-retransmit-mult",
    kind: int,
    default: 4,
    help: "piggyback sends = mult × log10(N + 1)",
    check: atLeast(1),
  },
  awarenessMaxMultiplier: {
    name: "mesh-awareness-max-multiplier",
    kind: int,
    default: 8,
    help: "local-health ceiling on timeout stretching (1 is off)",
    check: atLeast(1),
  },
  pushPullIntervalSecs: {
    name: "mesh-push-pull-interval-secs",
    kind: int,
    default: 30,
    help: "full-state exchange; 0 off",
    check: atLeast(0),
  },
  reconnectIntervalSecs: {
    name: "mesh-reconnect-interval-secs",
    kind: int,
    default: 10,
    help: "retry one DOWN member; 0 off",
    check: atLeast(0),
  },
  reapSecs: {
    name: "mesh-reap-secs",
    kind: int,
    default: 300,
    help: "forget DOWN and LEAVING members after this",
    check: atLeast(1),
  },
  broadcastTimeoutMs: {
    name: "mesh-broadcast-timeout-ms",
    kind: int,
    default: 3000,
    help: "wait for acks of broadcasts and leave",
    check: atLeast(1),
  },
  joinBackoffMs: {
    name: "mesh-join-backoff-ms",
    kind: int,
    default: 1000,
    help: "first seed retry delay, doubling",
    check: atLeast(1),
  },
  joinMaxBackoffSecs: {
    name: "mesh-join-max-backoff-secs",
    kind: int,
    default: 60,
    help: "cap on the seed retry backoff",
    check: atLeast(1),
  },
  reconnectTimeoutSecs: {
    name: "mesh-reconnect-timeout-secs",
    kind: int,
    default: 21_600,
    help: "keep retrying forgotten members and seeds this long (partitions heal)",
    check: atLeast(0),
  },
  maxPiggyback: {
    name: "mesh-max-piggyback",
    kind: int,
    default: 32,
    help: "membership updates piggybacked per message",
    check: atLeast(1),
  },
  maxMembers: {
    name: "mesh-max-members",
    kind: int,
    default: 10_000,
    help: "members a router keeps at most",
    check: atLeast(2),
  },
  heartbeatSecs: {
    name: "mesh-heartbeat-secs",
    kind: int,
    default: 15,
    help: "heartbeat an idle sync stream after this",
    check: atLeast(1),
  },
  streamIdleTimeoutSecs: {
    name: "mesh-stream-idle-timeout-secs",
    kind: int,
    default: 60,
    help: "close a silent sync stream",
    // Checked against --mesh-heartbeat-secs in validate.ts.
  },
  streamQueueSize: {
    name: "mesh-stream-queue-size",
    kind: int,
    default: 128,
    help: "frames a stream direction may queue",
    check: atLeast(1),
  },
  loadSyncMs: {
    name: "mesh-load-sync-ms",
    kind: int,
    default: 50,
    help: "tell peers this router's load on each worker at most this often; 0: never",
    check: atLeast(0),
  },
};
