/**
 * Types shared across layers: what a worker looks like to a policy, what a request looks like
 * to a policy, and a worker's load report. Policies import only these, never the worker
 * registry or the proxy.
 */

import type { HeaderMap } from "./http.ts";

/** Lifecycle states of a worker; only `ready` is routable. */
export type WorkerStatus = "pending" | "ready" | "not_ready" | "failed" | "draining";

/** A worker's role. */
export type WorkerType = "regular" | "prefill" | "decode";

/** How the gateway talks to a worker. */
export type ConnectionMode = "http" | "grpc";

/** Inference endpoints the gateway routes. */
export type Endpoint = "chat" | "completions" | "generate" | "embeddings" | "rerank";

/** Each endpoint's path, the same on the gateway and on its workers. */
export const ENDPOINT_PATHS: Readonly<Record<Endpoint, string>> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  generate: "/generate",
  embeddings: "/v1/embeddings",
  rerank: "/v1/rerank",
};

/**
 * A worker's backend load report, normalised from `/v1/loads`, `/get_load` or Prometheus text.
 * Sums over data-parallel ranks, except `tokenUsage` which is their mean.
 */
export interface LoadSnapshot {
  /** Requests in the running batch. */
  runningRequests: number;
  /** Requests in the waiting queue. */
  waitingRequests: number;
  /** Uncached prompt tokens in the waiting queue; null when the engine does not say. */
  waitingUncachedTokens: number | null;
  /** KV tokens in use; null when unknown. */
  usedTokens: number | null;
  /** KV token capacity; null when unknown. */
  maxTokens: number | null;
  /** Mean KV usage over ranks, 0..1. */
  tokenUsage: number;
  /** Generation throughput in tokens/s; null when unknown. */
  genThroughput: number | null;
  /** Engine-reported prefix-cache hit rate, 0..1; null when unknown. */
  cacheHitRate: number | null;
  /** Where the report came from. */
  source: "loads" | "get_load" | "metrics";
  /** The engine's per-rank objects as received (for `/get_loads` details). */
  details: unknown;
}

/** What a policy may read about a candidate worker. */
export interface WorkerView {
  /** Registry id (UUID). */
  readonly id: string;
  /** A small integer unique to this worker in this gateway (cheap identity for policies). */
  readonly seq: number;
  /** Base URL, e.g. `http://127.0.0.1:8001`. */
  readonly url: string;
  /**
   * Requests in flight on the worker: this gateway's, and on a mesh its peers' as they last told
   * (every `--mesh-load-sync-ms`).
   */
  readonly inFlight: number;
  /**
   * Prompt tokens sent to the worker that have not produced a first token yet (each request
   * counted as its policy's estimate of the tokens the worker must prefill): the worker's prefill
   * backlog, exact and current for this gateway's requests, and on a mesh its peers' as they last
   * told.
   */
  readonly prefillTokens: number;
  /** The last backend load report, or null. */
  readonly load: LoadSnapshot | null;
  /** When `load` arrived (clock ms; 0 if never). */
  readonly loadAt: number;
  /** Requests in flight on this worker that carry sticky key `key`. */
  keyInFlight(key: string): number;
  /** Distinct sticky keys with a request in flight on this worker. */
  readonly activeKeys: number;
  /** Role of the worker. */
  readonly type: WorkerType;
  /** KV cache capacity in tokens its engine stated when it became ready; null when unknown. */
  readonly kvCapacity?: number | null;
  /**
   * Uncached prompt tokens sent to it recently, this gateway's and on a mesh its peers', each
   * weighed e^(−age/τ) at clock time `now` (`recent_work.ts`): τ × the rate at which new
   * tokens enter its KV cache. Absent where not tracked.
   */
  recentWork?(now: number): number;
  /**
   * Characters of routing text per token of this worker, learned from its answers; null (or
   * absent) before enough of them: the request's `charsPerToken` stands in.
   */
  readonly charsPerToken?: number | null;
}

/**
 * What a policy tells the router about its pick beyond the worker, filled in during `select`:
 * the router counts `prefillTokens` in the worker's `prefillTokens` until the first token, and
 * compares `predictedCached` with the cached tokens the worker reports.
 */
export interface SelectionNote {
  /** Tokens the chosen worker is expected to prefill (preset: the whole prompt's estimate). */
  prefillTokens: number;
  /** Prompt tokens the policy expects the worker to find cached, or null: no prediction. */
  predictedCached: number | null;
  /** The policy that picked (set by the router). */
  policy?: string;
  /** The policy's branch for this pick (`smg_policy_decisions_total`'s), where it says. */
  branch?: string;
  /** Prefix units (characters, or tokens) of the request the policy found held, where it says. */
  matched?: number;
  /** How many workers were eligible (set by the router). */
  eligible?: number;
  /**
   * Called with what the worker reported of the prompt (its tokens and those it found cached)
   * once the answer says so, when the pick predicted cached tokens: cache_aware corrects its
   * tree where the worker held less than it believed.
   */
  onReport?: (reported: { prompt: number; cached: number }) => void;
}

/** The routing inputs of one request, extracted once from its body and headers. */
export interface RouteRequest {
  /** Which endpoint the request came in on. */
  readonly endpoint: Endpoint;
  /** Requested model, or null when the body has none (any worker may serve it). */
  readonly model: string | null;
  /** Whether the client asked for a stream. */
  readonly stream: boolean;
  /** Text a prefix-aware policy routes on (messages joined, prompt, or text). */
  readonly text: string;
  /** Token ids when known (`input_ids` or `x-smg-routing-tokens`), else null. */
  readonly tokens: readonly number[] | null;
  /**
   * Whether the gateway made `tokens` from `text` (HTTP workers publishing KV events): a policy
   * keeping a text index records the decision there too, so a later request of the model routed
   * on its text sees it. Absent: false.
   */
  readonly tokenizedText?: boolean;
  /**
   * Characters of `text` per token for its model, as learned when the request arrived
   * (`lib/core/chars_per_token.ts`): what every conversion of its text into tokens divides by.
   */
  readonly charsPerToken: number;
  /** The request headers. */
  readonly headers: HeaderMap;
  /** First valid routing-key header value (≤ 128 bytes), or null. */
  readonly routingKey: string | null;
  /** The body's `rid` when it is a string, or null. */
  readonly rid: string | null;
  /**
   * Session key from `rid` with `_tN`/`_rN` suffixes stripped (`conv_t2_r1` → `conv`); only with
   * `--routing-key-override`, else null.
   */
  readonly ridKey: string | null;
  /**
   * The key sticky sessions pin on: `ridKey`, else the routing-key header (suffix-stripped too
   * when the override is on). Null when neither is present.
   */
  readonly stickyKey: string | null;
}
