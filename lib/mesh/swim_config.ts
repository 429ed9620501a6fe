/**
 * Timing and fan-out of the SWIM core, with the seed's values where it gives them (probe every
 * second, ping-req through 3 peers, 3 s broadcasts, 1 s retry backoff doubling to 60 s) and
 * hashicorp/memberlist's LAN defaults for the rest (500 ms probe timeout, suspicion 4 × log10 N
 * probe intervals stretched up to 6× without confirmations, Lifeguard's awareness up to 8×).
 * Each field is a `--mesh-*` flag of the same meaning.
 */

/** SWIM timing and fan-out. */
export interface SwimConfig {
  /** Time between probe rounds (`--mesh-probe-interval-ms`, 1000). */
  probeIntervalMs: number;
  /** Wait for a direct ack before asking others (`--mesh-probe-timeout-ms`, 500). */
  probeTimeoutMs: number;
  /** Peers asked to probe for us when the direct ping fails (`--mesh-indirect-checks`, 3). */
  indirectChecks: number;
  /** Suspicion lasts this many probe intervals × log10(N), at least 1 × (`--mesh-suspicion-mult`, 4). */
  suspicionMult: number;
  /** ...and starts this many times longer, shrinking with confirmations (`--mesh-suspicion-max-timeout-mult`, 6). */
  suspicionMaxTimeoutMult: number;
  /** A piggybacked update is sent this many × log10(N+1) times (`--mesh-retransmit-mult`, 4). */
  retransmitMult: number;
  /** Lifeguard: local health stretches timeouts up to this factor (`--mesh-awareness-max-multiplier`, 8). */
  awarenessMaxMultiplier: number;
  /** Most updates piggybacked on one message (`--mesh-max-piggyback`, 32). */
  maxPiggyback: number;
  /** Most members a router keeps; unknown names beyond are ignored (`--mesh-max-members`, 10000). */
  maxMembers: number;
  /** Full-state exchange with one random peer this often; 0 is off (`--mesh-push-pull-interval-secs`, 30). */
  pushPullIntervalMs: number;
  /** Try one DOWN member this often, so healed partitions merge; 0 is off (`--mesh-reconnect-interval-secs`, 10). */
  reconnectIntervalMs: number;
  /** DOWN and LEAVING members are forgotten after this (`--mesh-reap-secs`, 300). */
  reapMs: number;
  /**
   * Forgotten members' addresses (and seeds) keep being retried this long, so partitions longer
   * than the reap interval still heal (`--mesh-reconnect-timeout-secs`, 21600, as Serf's reconnect_timeout).
   */
  reconnectTimeoutMs: number;
  /** Status broadcasts and the leave announcement wait this long for acks (`--mesh-broadcast-timeout-ms`, 3000). */
  broadcastTimeoutMs: number;
  /** First retry of an unanswered join (`--mesh-join-backoff-ms`, 1000); doubles up to the max. */
  joinBackoffMs: number;
  /** Cap on the join retry backoff (`--mesh-join-max-backoff-secs`, 60). */
  joinMaxBackoffMs: number;
}

/** The defaults. */
export function defaultSwimConfig(): SwimConfig {
  return {
    probeIntervalMs: 1000,
    probeTimeoutMs: 500,
    indirectChecks: 3,
    suspicionMult: 4,
    suspicionMaxTimeoutMult: 6,
    retransmitMult: 4,
    awarenessMaxMultiplier: 8,
    maxPiggyback: 32,
    maxMembers: 10_000,
    pushPullIntervalMs: 30_000,
    reconnectIntervalMs: 10_000,
    reapMs: 300_000,
    reconnectTimeoutMs: 21_600_000,
    broadcastTimeoutMs: 3000,
    joinBackoffMs: 1000,
    joinMaxBackoffMs: 60_000,
  };
}
