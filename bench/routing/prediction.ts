/**
 * cache_aware's prediction check as the routing benchmark reports it: the gateway's
 * `smg_policy_cache_prediction_error` histogram (reported − predicted cached share of each
 * prompt) and `smg_policy_cached_tokens_total` (predicted and reported cached tokens) read from
 * its `/metrics` at the window's start and end, and the difference summarised: requests checked,
 * mean error, the shares within ±0.05 and ±0.25, and cached tokens predicted ÷ reported.
 */

import { round } from "../overhead/stats.ts";

/** Cumulative bucket counts by upper bound, with the total count and sum. */
export interface Histogram {
  buckets: Map<string, number>;
  count: number;
  sum: number;
  /** `smg_policy_cached_tokens_total` by source: predicted and reported. */
  predicted: number;
  reported: number;
}

/** One window's prediction errors, summarised. */
export interface Prediction {
  /** Requests whose prediction was checked. */
  checked: number;
  /** Mean of reported − predicted share. */
  meanError: number | null;
  /** Shares of checked requests with |error| ≤ 0.05 and ≤ 0.25. */
  within5: number | null;
  within25: number | null;
  /** Cached tokens predicted ÷ reported over the window (null: none reported). */
  ratio: number | null;
}

const NAME = "smg_policy_cache_prediction_error";
const TOKENS = "smg_policy_cached_tokens_total";

/** An empty histogram. */
export function emptyHistogram(): Histogram {
  return { buckets: new Map(), count: 0, sum: 0, predicted: 0, reported: 0 };
}

/** The histogram of `policy` in a `/metrics` text (empty when absent). */
export function parseHistogram(text: string, policy = "cache_aware"): Histogram {
  const h = emptyHistogram();
  const label = `policy="${policy}"`;
  for (const line of text.split("\n")) {
    if (!line.includes(label)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (line.startsWith(TOKENS)) {
      if (line.includes(`source="predicted"`)) h.predicted = value;
      else if (line.includes(`source="reported"`)) h.reported = value;
      continue;
    }
    if (!line.startsWith(NAME)) continue;
    if (line.startsWith(`${NAME}_bucket`)) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      if (le !== undefined) h.buckets.set(le, value);
    } else if (line.startsWith(`${NAME}_count`)) h.count = value;
    else if (line.startsWith(`${NAME}_sum`)) h.sum = value;
  }
  return h;
}

/** The sum of `hs` (several routers' histograms read at one time). */
export function sumHistograms(hs: readonly Histogram[]): Histogram {
  const total = emptyHistogram();
  for (const h of hs) {
    for (const [le, n] of h.buckets) total.buckets.set(le, (total.buckets.get(le) ?? 0) + n);
    total.count += h.count;
    total.sum += h.sum;
    total.predicted += h.predicted;
    total.reported += h.reported;
  }
  return total;
}

/** Reads the histogram from `metricsUrl` (empty when it cannot be read). */
export async function readHistogram(metricsUrl: string): Promise<Histogram> {
  try {
    const r = await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) });
    return parseHistogram(await r.text());
  } catch {
    return emptyHistogram();
  }
}

/** `after − before`, summarised; null when nothing was checked. */
export function summarisePrediction(before: Histogram, after: Histogram): Prediction | null {
  const n = after.count - before.count;
  if (n <= 0) return null;
  const at = (le: string) => (after.buckets.get(le) ?? 0) - (before.buckets.get(le) ?? 0);
  const within = (lo: string, hi: string) => round((at(hi) - at(lo)) / n, 3);
  return {
    checked: n,
    meanError: round((after.sum - before.sum) / n, 3),
    // Buckets are cumulative: (−0.05, 0.05] and (−0.25, 0.25].
    within5: within("-0.05", "0.05"),
    within25: within("-0.25", "0.25"),
    ratio: after.reported > before.reported
      ? round((after.predicted - before.predicted) / (after.reported - before.reported), 2)
      : null,
  };
}
