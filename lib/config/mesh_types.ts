/**
 * The HA mesh's part of the gateway configuration (`GatewayConfig.mesh`, re-exported by
 * `types.ts`): SMG's mesh flags and our SWIM timing flags, each field naming its flag.
 */

/** The HA mesh (SMG's flags, plus our SWIM timing flags with memberlist's values). */
export interface MeshConfig {
  /** Join routers into a mesh (`--enable-mesh`). */
  enabled: boolean;
  /** Unique router name; null draws `Mesh_` + 4 characters at start (`--mesh-server-name`). */
  serverName: string | null;
  /** Mesh bind address (`--mesh-host`). */
  host: string;
  /** Address peers dial; null uses `--mesh-host` (`--mesh-advertise-host`). */
  advertiseHost: string | null;
  /** Mesh port, bound and advertised (`--mesh-port`). */
  port: number;
  /** Routers to join through, `host:port`; every one is tried (`--mesh-peer-urls`). */
  peerUrls: string[];
  /** CA that signs every router's certificate; with cert and key, mTLS (`--mesh-tls-ca-cert`). */
  tlsCaCert: string | null;
  /** This router's certificate, PEM (`--mesh-tls-cert`). */
  tlsCert: string | null;
  /** Its private key, PEM (`--mesh-tls-key`). */
  tlsKey: string | null;
  /** Time between probe rounds, ms (`--mesh-probe-interval-ms`). */
  probeIntervalMs: number;
  /** Direct-ping timeout before ping-req, ms (`--mesh-probe-timeout-ms`). */
  probeTimeoutMs: number;
  /** Peers asked to probe indirectly (`--mesh-indirect-checks`). */
  indirectChecks: number;
  /** Suspicion = mult × max(1, log10 N) probe intervals (`--mesh-suspicion-mult`). */
  suspicionMult: number;
  /** Unconfirmed suspicions last this many times longer (`--mesh-suspicion-max-timeout-mult`). */
  suspicionMaxTimeoutMult: number;
  /** Piggyback retransmissions = mult × ceil(log10(N + 1)) (`--mesh-retransmit-mult`). */
  retransmitMult: number;
  /** Lifeguard local-health ceiling on timeout stretching (`--mesh-awareness-max-multiplier`). */
  awarenessMaxMultiplier: number;
  /** Full-state exchange with a random peer, seconds; 0 off (`--mesh-push-pull-interval-secs`). */
  pushPullIntervalSecs: number;
  /** Retry one DOWN member, seconds; 0 off (`--mesh-reconnect-interval-secs`). */
  reconnectIntervalSecs: number;
  /** Forget DOWN and LEAVING members after, seconds (`--mesh-reap-secs`). */
  reapSecs: number;
  /** Status broadcasts and the leave wait for acks this long, ms (`--mesh-broadcast-timeout-ms`). */
  broadcastTimeoutMs: number;
  /** First seed retry delay, ms, doubling (`--mesh-join-backoff-ms`). */
  joinBackoffMs: number;
  /** Cap on the seed retry backoff, seconds (`--mesh-join-max-backoff-secs`). */
  joinMaxBackoffSecs: number;
  /** Updates piggybacked on one message (`--mesh-max-piggyback`). */
  maxPiggyback: number;
  /** Members a router keeps at most (`--mesh-max-members`). */
  maxMembers: number;
  /** Forgotten members' addresses and seeds are retried this long, seconds (`--mesh-reconnect-timeout-secs`). */
  reconnectTimeoutSecs: number;
  /** Heartbeat an idle sync stream after, seconds (`--mesh-heartbeat-secs`). */
  heartbeatSecs: number;
  /** Close a sync stream silent this long, seconds (`--mesh-stream-idle-timeout-secs`). */
  streamIdleTimeoutSecs: number;
  /** Frames each stream direction may queue before dropping (`--mesh-stream-queue-size`). */
  streamQueueSize: number;
  /**
   * The longest wait before peers hear of a change in this router's in-flight requests and
   * prefill backlog per worker, ms; 0: they never do (`--mesh-load-sync-ms`).
   */
  loadSyncMs: number;
}
