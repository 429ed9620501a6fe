/**
 * Turns a worker's load report into a `LoadSnapshot`, from any of the three shapes engines
 * serve: SMG/sglang `GET /v1/loads` (`{loads:[per-rank]}`), sglang's older `GET /get_load`
 * (an array of `{num_reqs, num_waiting_reqs, num_tokens}`), or sglang/vLLM Prometheus gauges
 * from `GET /metrics`. Sums over ranks, except token usage which is their mean. A shape that
 * does not match returns null.
 */

import type { LoadSnapshot } from "../core/types.ts";

type Obj = Record<string, unknown>;

function num(o: Obj, key: string): number | null {
  const v = o[key];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function sum(ranks: Obj[], key: string): number | null {
  let total: number | null = null;
  for (const r of ranks) {
    const v = num(r, key);
    if (v !== null) total = (total ?? 0) + v;
  }
  return total;
}

function mean(ranks: Obj[], key: string): number | null {
  const s = sum(ranks, key);
  const n = ranks.filter((r) => num(r, key) !== null).length;
  return s === null || n === 0 ? null : s / n;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses a `/v1/loads` body; null unless it has a non-empty `loads` array of objects. */
export function parseLoads(body: unknown): LoadSnapshot | null {
  if (!isObj(body) || !Array.isArray(body.loads) || body.loads.length === 0) return null;
  const ranks = body.loads.filter(isObj);
  if (ranks.length === 0) return null;
  const used = sum(ranks, "num_used_tokens");
  const max = sum(ranks, "max_total_num_tokens");
  return {
    runningRequests: sum(ranks, "num_running_reqs") ?? 0,
    waitingRequests: sum(ranks, "num_waiting_reqs") ?? 0,
    waitingUncachedTokens: sum(ranks, "num_waiting_uncached_tokens"),
    usedTokens: used,
    maxTokens: max,
    tokenUsage: mean(ranks, "token_usage") ?? (used !== null && max ? used / max : 0),
    genThroughput: sum(ranks, "gen_throughput"),
    cacheHitRate: mean(ranks, "cache_hit_rate"),
    source: "loads",
    details: body.loads,
  };
}

/** Parses sglang's legacy `/get_load` array; null when it is not that shape. */
export function parseGetLoad(body: unknown): LoadSnapshot | null {
  const ranks = Array.isArray(body) ? body.filter(isObj) : isObj(body) ? [body] : [];
  if (ranks.length === 0 || ranks.every((r) => num(r, "num_reqs") === null)) return null;
  const waiting = sum(ranks, "num_waiting_reqs") ?? 0;
  const total = sum(ranks, "num_reqs") ?? 0;
  return {
    // num_reqs counts running and waiting requests together.
    runningRequests: Math.max(0, total - waiting),
    waitingRequests: waiting,
    waitingUncachedTokens: sum(ranks, "num_pending_tokens"),
    usedTokens: sum(ranks, "num_tokens"),
    maxTokens: null,
    tokenUsage: 0,
    genThroughput: null,
    cacheHitRate: null,
    source: "get_load",
    details: body,
  };
}

/** Samples of one metric name: every value, whatever its labels. */
function scrape(text: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = brace >= 0 ? line.indexOf(" ", line.indexOf("}", brace)) : line.indexOf(" ");
    if (space < 0) continue;
    const name = line.slice(0, brace >= 0 ? brace : space);
    const value = Number(line.slice(space + 1).trim().split(" ")[0]);
    if (!Number.isFinite(value)) continue;
    const list = out.get(name);
    if (list) list.push(value);
    else out.set(name, [value]);
  }
  return out;
}

const total = (v: number[] | undefined) => (v ? v.reduce((a, b) => a + b, 0) : null);
const avg = (v: number[] | undefined) => (v && v.length ? total(v)! / v.length : null);

/** Parses sglang (`sglang:` or `sglang_`) or vLLM (`vllm:`) Prometheus gauges; null otherwise. */
export function parsePrometheusLoad(text: string): LoadSnapshot | null {
  const m = scrape(text);
  for (const p of ["sglang:", "sglang_"]) {
    if (!m.has(`${p}token_usage`)) continue;
    return {
      runningRequests: total(m.get(`${p}num_running_reqs`)) ?? 0,
      waitingRequests: total(m.get(`${p}num_queue_reqs`)) ?? 0,
      waitingUncachedTokens: null,
      usedTokens: total(m.get(`${p}num_used_tokens`)),
      maxTokens: total(m.get(`${p}max_total_num_tokens`)),
      tokenUsage: avg(m.get(`${p}token_usage`)) ?? 0,
      genThroughput: total(m.get(`${p}gen_throughput`)),
      cacheHitRate: avg(m.get(`${p}cache_hit_rate`)),
      source: "metrics",
      details: null,
    };
  }
  const kv = m.get("vllm:kv_cache_usage_perc") ?? m.get("vllm:gpu_cache_usage_perc");
  if (kv) {
    return {
      runningRequests: total(m.get("vllm:num_requests_running")) ?? 0,
      waitingRequests: total(m.get("vllm:num_requests_waiting")) ?? 0,
      waitingUncachedTokens: null,
      usedTokens: null,
      maxTokens: null,
      tokenUsage: avg(kv) ?? 0,
      genThroughput: null,
      cacheHitRate: avg(m.get("vllm:gpu_prefix_cache_hit_rate")),
      source: "metrics",
      details: null,
    };
  }
  return null;
}

/** SMG's `/get_loads` figure: used KV tokens summed over ranks, or -1 when unknown. */
export function usedTokensOrUnknown(s: LoadSnapshot | null): number {
  return s?.usedTokens ?? -1;
}
