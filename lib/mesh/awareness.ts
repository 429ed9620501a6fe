/**
 * Lifeguard's local health ("awareness"), pure: a score from 0 (healthy) to max − 1 that rises
 * when this router's own probes fail without the nacks that would prove its peers heard it, or
 * when it has to refute a suspicion of itself, and falls with each clean probe. Timeouts are
 * multiplied by score + 1, so a slow or overloaded router waits longer before accusing anyone.
 */

/** The new score after `delta`, clamped to [0, max − 1]. */
export function applyAwareness(score: number, delta: number, maxMultiplier: number): number {
  return Math.min(Math.max(0, score + delta), Math.max(0, maxMultiplier - 1));
}

/** `ms` stretched by the score. */
export function scaleTimeout(ms: number, score: number): number {
  return ms * (score + 1);
}

/**
 * Score change after a failed probe: one point per missing nack (peers that did not answer us
 * at all), or one point when nobody could be asked.
 */
export function failedProbeDelta(expectedNacks: number, nacks: number): number {
  return expectedNacks === 0 ? 1 : Math.max(0, expectedNacks - nacks);
}
