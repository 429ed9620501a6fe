/**
 * Windows of histograms for the status page: one reading merges every series of a family (their
 * bucket counts, sum and count), two readings taken some seconds apart give the window between
 * them, and a window gives its quantiles (interpolated linearly inside the bucket, as
 * Prometheus's `histogram_quantile`), its mean, and the share of its observations in a range.
 * Pure functions over numbers. Known gap: a quantile is only as fine as the buckets.
 */

import type { HistogramSeries } from "../metrics/fast.ts";

/** Observations of a histogram: per-bucket counts (not cumulative; +Inf last), sum and count. */
export interface HistogramReading {
  /** Observations per bucket, one more slot than bounds (+Inf). */
  counts: number[];
  /** Sum of the observations. */
  sum: number;
  /** Number of observations. */
  count: number;
}

/** The reading that merges `series` (all with `bounds`; series with other bounds are skipped). */
export function readHistograms(
  bounds: readonly number[],
  series: Iterable<{ readonly s: HistogramSeries }>,
): HistogramReading {
  const r: HistogramReading = { counts: new Array(bounds.length + 1).fill(0), sum: 0, count: 0 };
  for (const { s } of series) {
    if (s.counts.length !== r.counts.length) continue;
    for (let i = 0; i < s.counts.length; i++) r.counts[i] += s.counts[i];
    r.sum += s.sum;
    r.count += s.count;
  }
  return r;
}

/**
 * What was observed between `earlier` and `later`; null when a count went down (the series was
 * reset in between, so the difference means nothing).
 */
export function windowBetween(
  later: HistogramReading,
  earlier: HistogramReading,
): HistogramReading | null {
  if (later.counts.length !== earlier.counts.length || later.count < earlier.count) return null;
  const counts = later.counts.map((c, i) => c - earlier.counts[i]);
  if (counts.some((c) => c < 0)) return null;
  return { counts, sum: later.sum - earlier.sum, count: later.count - earlier.count };
}

/**
 * The value below which a share `q` (0..1) of `w`'s observations fell; null for an empty
 * window. Inside a bucket the value is interpolated linearly from its lower bound (0 for a first
 * bucket above 0); in the +Inf bucket it is the last finite bound.
 */
export function quantile(
  bounds: readonly number[],
  w: HistogramReading,
  q: number,
): number | null {
  if (w.count <= 0 || bounds.length === 0) return null;
  const rank = q * w.count;
  let below = 0;
  for (let i = 0; i < w.counts.length; i++) {
    const n = w.counts[i];
    if (n > 0 && below + n >= rank) {
      if (i === bounds.length) return bounds[bounds.length - 1];
      const upper = bounds[i];
      const lower = i > 0 ? bounds[i - 1] : Math.min(0, upper);
      return lower + (upper - lower) * Math.max(0, rank - below) / n;
    }
    below += n;
  }
  return bounds[bounds.length - 1];
}

/** The mean of `w`'s observations; null for an empty window. */
export function mean(w: HistogramReading): number | null {
  return w.count > 0 ? w.sum / w.count : null;
}

/**
 * The share of `w`'s observations whose bucket lies wholly inside (`low`, `high`]: exact when
 * both are bucket bounds. Null for an empty window.
 */
export function shareWithin(
  bounds: readonly number[],
  w: HistogramReading,
  low: number,
  high: number,
): number | null {
  if (w.count <= 0) return null;
  let n = 0;
  for (let i = 0; i < w.counts.length; i++) {
    const lower = i > 0 ? bounds[i - 1] : -Infinity;
    const upper = i < bounds.length ? bounds[i] : Infinity;
    if (lower >= low && upper <= high) n += w.counts[i];
  }
  return n / w.count;
}
