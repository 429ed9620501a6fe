/**
 * Whether routing predictions come true: the cached share of the prompt a policy predicted for
 * its pick (`SelectionNote.predictedCached` over the prompt's estimate) against the share the
 * worker reported (`usage.prompt_tokens_details.cached_tokens` over `usage.prompt_tokens`), as
 * `smg_policy_cache_prediction_error{policy}` (reported − predicted, in [-1, 1]) and the two
 * token totals in `smg_policy_cached_tokens_total{policy,source}`. Shares, not tokens: over HTTP
 * the gateway counts characters at its estimate of a token, the worker its tokenizer's tokens.
 *
 * The usage is read from the answer's last bytes when a prediction was made or the request was
 * routed on text (its `prompt_tokens` teach the characters per token, `TextRatios`): the final SSE
 * chunks (with `stream_options.include_usage`) or a whole JSON body; gRPC answers carry it.
 */

import type { RouteRequest, SelectionNote } from "../core/types.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { promptTokens } from "../policies/expected_wait.ts";

/** Prompt and cached tokens a worker reported. */
export interface ReportedUsage {
  /** `prompt_tokens`. */
  prompt: number;
  /** `cached_tokens`, or null when the answer did not say. */
  cached: number | null;
  /** `completion_tokens`, or null (undefined) when the answer did not say. */
  completion?: number | null;
}

const decoder = new TextDecoder();
const PROMPT = /"prompt_tokens"\s*:\s*(\d+)/g;
const CACHED = /"cached_tokens"\s*:\s*(\d+)/g;
const COMPLETION = /"completion_tokens"\s*:\s*(\d+)/g;

/** The last `prompt_tokens` and `cached_tokens` in `chunks` (null: no prompt count). */
export function usageIn(chunks: readonly Uint8Array[]): ReportedUsage | null {
  let text = "";
  for (const c of chunks) text += decoder.decode(c);
  const last = (re: RegExp) => {
    let v: number | null = null;
    for (const m of text.matchAll(re)) v = Number(m[1]);
    return v;
  };
  const cached = last(CACHED);
  const prompt = last(PROMPT);
  return prompt === null || prompt <= 0 ? null : { prompt, cached, completion: last(COMPLETION) };
}

/** Records predictions against reports. */
export class CachePredictions {
  readonly #m: Metrics;

  constructor(metrics: Metrics) {
    this.#m = metrics;
  }

  /**
   * One answered request: its pick's `note` (none, or no prediction: nothing to check) against
   * the usage the worker reported.
   */
  check(note: SelectionNote | undefined, rr: RouteRequest, reported: ReportedUsage): void {
    const estimate = promptTokens(rr);
    if (!note || note.predictedCached === null || estimate <= 0 || reported.prompt <= 0) return;
    if (reported.cached === null) return;
    const policy = note.policy ?? "unknown";
    const predicted = Math.min(1, note.predictedCached / estimate);
    const actual = Math.min(1, reported.cached / reported.prompt);
    this.#m.cachePredictionError.with(policy).observe(actual - predicted);
    this.#m.cachedTokens.with(policy, "predicted").inc(Math.round(predicted * reported.prompt));
    this.#m.cachedTokens.with(policy, "reported").inc(reported.cached);
    note.onReport?.({ prompt: reported.prompt, cached: reported.cached });
  }
}
