/**
 * Timing and fan-out of the SWIM core, in milliseconds, taken from the `--mesh-*` flags
 * (`MeshConfig`, where each default is documented: probe every second, ping-req through 3
 * peers, 3 s broadcasts, 1 s retry backoff doubling to 60 s, and hashicorp/memberlist's LAN
 * defaults for the rest, such as a 500 ms probe timeout, suspicion 4 × log10 N probe intervals
 * stretched up to 6× without confirmations, Lifeguard's awareness up to 8×).
 */

import { defaultConfig, type MeshConfig } from "../config/config.ts";

/** SWIM timing and fan-out (see the `MeshConfig` field of the same name for each flag). */
export interface SwimConfig {
  /** Time between probe rounds. */
  probeIntervalMs: number;
  /** Wait for a direct ack before asking others. */
  probeTimeoutMs: number;
  /** Peers asked to probe for us when the direct ping fails. */
  indirectChecks: number;
  /** Suspicion = mult × max(1, log10 N) probe intervals once confirmed. */
  suspicionMult: number;
  /** Unconfirmed suspicions last this many times longer. */
  suspicionMaxTimeoutMult: number;
  /** A piggybacked update is sent mult × ceil(log10(N + 1)) times. */
  retransmitMult: number;
  /** Lifeguard: local health stretches timeouts up to this factor. */
  awarenessMaxMultiplier: number;
  /** Most updates piggybacked on one message. */
  maxPiggyback: number;
  /** Most members kept; unknown names beyond are ignored. */
  maxMembers: number;
  /** Full-state exchange with one random peer this often; 0 is off. */
  pushPullIntervalMs: number;
  /** Try one DOWN member, forgotten address or unanswered seed this often; 0 is off. */
  reconnectIntervalMs: number;
  /** DOWN and LEAVING members are forgotten after this. */
  reapMs: number;
  /** Forgotten addresses and seeds are retried this long, so long partitions heal. */
  reconnectTimeoutMs: number;
  /** Status broadcasts and the leave announcement wait this long for acks. */
  broadcastTimeoutMs: number;
  /** First retry of an unanswered join; doubles up to the max. */
  joinBackoffMs: number;
  /** Cap on the join retry backoff. */
  joinMaxBackoffMs: number;
}

/** The SWIM timing of the mesh flags. */
export function swimConfigOf(m: MeshConfig): SwimConfig {
  return {
    probeIntervalMs: m.probeIntervalMs,
    probeTimeoutMs: m.probeTimeoutMs,
    indirectChecks: m.indirectChecks,
    suspicionMult: m.suspicionMult,
    suspicionMaxTimeoutMult: m.suspicionMaxTimeoutMult,
    retransmitMult: m.retransmitMult,
    awarenessMaxMultiplier: m.awarenessMaxMultiplier,
    maxPiggyback: m.maxPiggyback,
    maxMembers: m.maxMembers,
    pushPullIntervalMs: m.pushPullIntervalSecs * 1000,
    reconnectIntervalMs: m.reconnectIntervalSecs * 1000,
    reapMs: m.reapSecs * 1000,
    reconnectTimeoutMs: m.reconnectTimeoutSecs * 1000,
    broadcastTimeoutMs: m.broadcastTimeoutMs,
    joinBackoffMs: m.joinBackoffMs,
    joinMaxBackoffMs: m.joinMaxBackoffSecs * 1000,
  };
}

/** The defaults: those of the flags. */
export function defaultSwimConfig(): SwimConfig {
  return swimConfigOf(defaultConfig().mesh);
}
