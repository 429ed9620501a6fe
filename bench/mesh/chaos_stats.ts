/**
 * Small pure helpers of the chaos bench: nearest-rank quantiles (so the p99 of 20 samples is
 * their maximum, said as such in the report), a summary of a sample, and the seeded random
 * source that makes a run's choice of victims repeatable.
 */

/** Median, p99 and max of a sample (nulls are failures, counted apart). */
export interface Summary {
  /** Samples that have a value. */
  count: number;
  /** Samples without one (timed out). */
  failed: number;
  /** Median, ms. */
  median: number | null;
  /** 99th percentile by nearest rank, ms. */
  p99: number | null;
  /** Maximum, ms. */
  max: number | null;
}

/** The nearest-rank `q` quantile (0 < q ≤ 1) of `xs`, or null if empty. */
export function quantile(xs: number[], q: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

/** Summarizes `xs`. */
export function summarize(xs: (number | null)[]): Summary {
  const ok = xs.filter((x): x is number => x !== null);
  return {
    count: ok.length,
    failed: xs.length - ok.length,
    median: quantile(ok, 0.5),
    p99: quantile(ok, 0.99),
    max: ok.length ? Math.max(...ok) : null,
  };
}

/** A seeded generator (the gateway's own mulberry32): same seed, same victims. */
export { seededRandom } from "../../lib/core/clock.ts";

/** Resolves after `ms`. A bench may wait on the clock; the tests never do. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
