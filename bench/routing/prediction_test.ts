/**
 * The routing benchmark's prediction check: a window's difference of the gateway's prediction
 * histogram and cached-token counters, read from `/metrics` text.
 */

import assert from "node:assert/strict";
import { parseHistogram, summarisePrediction } from "./prediction.ts";

const metrics = (n: number, sum: number, within: number, predicted: number, reported: number) =>
  [
    `smg_policy_cache_prediction_error_bucket{policy="cache_aware",le="-0.25"} 0`,
    `smg_policy_cache_prediction_error_bucket{policy="cache_aware",le="-0.05"} 0`,
    `smg_policy_cache_prediction_error_bucket{policy="cache_aware",le="0.05"} ${within}`,
    `smg_policy_cache_prediction_error_bucket{policy="cache_aware",le="0.25"} ${n}`,
    `smg_policy_cache_prediction_error_sum{policy="cache_aware"} ${sum}`,
    `smg_policy_cache_prediction_error_count{policy="cache_aware"} ${n}`,
    `smg_policy_cached_tokens_total{policy="cache_aware",source="predicted"} ${predicted}`,
    `smg_policy_cached_tokens_total{policy="cache_aware",source="reported"} ${reported}`,
    `smg_policy_cached_tokens_total{policy="prefix_hash",source="reported"} 999`,
  ].join("\n");

Deno.test("prediction check: the window's shares within bounds and cached tokens predicted ÷ reported", () => {
  const before = parseHistogram(metrics(10, 0.5, 8, 1000, 1000));
  const after = parseHistogram(metrics(30, 1.5, 26, 5000, 3000));
  assert.equal(after.reported, 3000, "only cache_aware's counters");
  const p = summarisePrediction(before, after)!;
  assert.equal(p.checked, 20);
  assert.equal(p.meanError, 0.05);
  assert.equal(p.within5, 0.9);
  assert.equal(p.within25, 1);
  assert.equal(p.ratio, 2, "4000 predicted for 2000 reported");
  assert.equal(summarisePrediction(after, after), null, "nothing checked");
  const none = summarisePrediction(before, parseHistogram(metrics(11, 0.5, 9, 1000, 1000)))!;
  assert.equal(none.ratio, null, "nothing reported in the window");
});
