/**
 * Suspicion timeout arithmetic, pure (memberlist's `suspicionTimeout` and Lifeguard's
 * confirmation-accelerated timer): a suspicion starts at `max` and shrinks toward `min` as
 * independent suspectors confirm it, on a log scale, so a lone (possibly slow) accuser gives
 * the suspect ample time to refute while a crash seen by many is declared quickly.
 */

/** Bounds of one suspicion. */
export interface SuspicionBounds {
  /** Shortest timeout, reached after `k` confirmations. */
  minMs: number;
  /** Timeout with no confirmation. */
  maxMs: number;
  /** Confirmations expected; 0 means the timeout is simply `minMs`. */
  k: number;
}

/** min = mult × max(1, log10 N) × interval; max = maxMult × min; k = mult − 2 when N − 2 ≥ that. */
export function suspicionBounds(
  members: number,
  probeIntervalMs: number,
  mult: number,
  maxMult: number,
): SuspicionBounds {
  const scale = Math.max(1, Math.log10(Math.max(1, members)));
  const minMs = mult * scale * probeIntervalMs;
  const wanted = Math.max(0, mult - 2);
  const k = members - 2 < wanted ? 0 : wanted;
  return { minMs, maxMs: k === 0 ? minMs : maxMult * minMs, k };
}

/** Timeout after `confirmations` independent confirmations: max − log(c+1)/log(k+1) × (max−min). */
export function suspicionTimeout(b: SuspicionBounds, confirmations: number): number {
  if (b.k === 0) return b.minMs;
  const frac = Math.log(confirmations + 1) / Math.log(b.k + 1);
  const t = b.maxMs - frac * (b.maxMs - b.minMs);
  return Math.max(b.minMs, Math.floor(t));
}

/** How many times a piggybacked update is sent: mult × ceil(log10(N + 1)). */
export function retransmitLimit(members: number, mult: number): number {
  return mult * Math.ceil(Math.log10(members + 1));
}
