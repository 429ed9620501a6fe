/**
 * The simulated worker's load as gateways read it: SMG/sglang `/v1/loads`, sglang's legacy
 * `/get_load`, and sglang-style Prometheus `/metrics` with the cumulative token counters a
 * benchmark needs (`sglang:prompt_tokens_total`, `sglang:cached_tokens_total`).
 */

import type { EngineStats } from "./types.ts";

/** The `/v1/loads` body (one data-parallel rank). */
export function loadsBody(s: EngineStats): unknown {
  return {
    timestamp: new Date().toISOString(),
    dp_rank_count: 1,
    loads: [{
      dp_rank: 0,
      num_running_reqs: s.running,
      num_waiting_reqs: s.waiting,
      num_waiting_uncached_tokens: s.waitingUncachedTokens,
      num_total_reqs: s.running + s.waiting,
      num_used_tokens: s.usedTokens,
      max_total_num_tokens: s.maxTokens,
      token_usage: s.tokenUsage,
      gen_throughput: s.genThroughput,
      cache_hit_rate: s.cacheHitRate,
      utilization: s.tokenUsage,
      max_running_requests: s.maxRunning,
    }],
  };
}

/** The `/get_load` body. */
export function getLoadBody(s: EngineStats): unknown {
  return [{
    dp_rank: 0,
    num_reqs: s.running + s.waiting,
    num_waiting_reqs: s.waiting,
    num_tokens: s.usedTokens,
    num_pending_tokens: s.waitingUncachedTokens,
  }];
}

/** The Prometheus text of `/metrics`. */
export function metricsText(s: EngineStats, model: string): string {
  const l = `{model_name="${model}"}`;
  const lines: string[] = [];
  const put = (name: string, type: "gauge" | "counter", help: string, v: number) => {
    lines.push(
      `# HELP sglang:${name} ${help}`,
      `# TYPE sglang:${name} ${type}`,
      `sglang:${name}${l} ${v}`,
    );
  };
  put("num_running_reqs", "gauge", "Requests in the running batch", s.running);
  put("num_queue_reqs", "gauge", "Requests waiting for admission", s.waiting);
  put("num_used_tokens", "gauge", "KV tokens in use", s.usedTokens);
  put("max_total_num_tokens", "gauge", "KV token capacity", s.maxTokens);
  put("token_usage", "gauge", "KV usage, 0..1", s.tokenUsage);
  put("gen_throughput", "gauge", "Decode tokens per second", s.genThroughput);
  put("cache_hit_rate", "gauge", "Smoothed prefix-cache hit rate", s.cacheHitRate);
  put(
    "prompt_tokens_total",
    "counter",
    "Prompt tokens of admitted requests",
    s.totals.promptTokens,
  );
  put(
    "cached_tokens_total",
    "counter",
    "Prompt tokens found in the prefix cache",
    s.totals.cachedTokens,
  );
  put("generation_tokens_total", "counter", "Generated tokens", s.totals.generatedTokens);
  put("num_requests_total", "counter", "Finished or aborted requests", s.totals.requests);
  put(
    "num_aborted_requests_total",
    "counter",
    "Requests aborted by their client",
    s.totals.aborted,
  );
  // sglang's is a histogram; its sum and count are what a mean needs (simulated seconds).
  const ttft = "sglang:time_to_first_token_seconds";
  lines.push(
    `# HELP ${ttft} Time from arrival to the first token (simulated seconds)`,
    `# TYPE ${ttft} summary`,
    `${ttft}_sum${l} ${s.totals.ttftMs / 1000}`,
    `${ttft}_count${l} ${s.totals.firstTokens}`,
  );
  return lines.join("\n") + "\n";
}
