/**
 * A worker's recent work: uncached prompt tokens sent to it, each weighed e^(−age/τ). It is τ ×
 * the rate at which new tokens enter its KV cache, which tells how long what it holds stays there
 * (`Worker.recentWork`, shared by load sync, read by cache_aware's placement freshness).
 */

/** τ, ms: long enough to average a bursty trace, short against a large cache's turnover. */
export const RECENT_WORK_TAU_MS = 30_000;

/** `value` recorded `ageMs` ago, decayed to now (a negative age counts as none). */
export function decayed(value: number, ageMs: number): number {
  return value * Math.exp(-Math.max(0, ageMs) / RECENT_WORK_TAU_MS);
}
