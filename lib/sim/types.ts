/**
 * The simulated engine's contract: its settings, what a generation request carries, what it
 * reports per request and in aggregate. `engine.ts` implements it; `server.ts` speaks sglang's and
 * vLLM's HTTP APIs over it. Times are simulated milliseconds; `timeScale` maps them to wall time.
 */

/** Engine settings; every field has the `smg sim-worker` flag default in its comment. */
export interface EngineConfig {
  /** KV cache capacity in tokens (`--kv-tokens`, 65536). */
  kvTokens: number;
  /** Tokens per KV block (`--block-size`, 16). */
  blockSize: number;
  /** Most requests in the running batch (`--max-running`, 32). */
  maxRunning: number;
  /** Most prompt tokens prefilled per step (`--prefill-chunk`, 2048). */
  prefillChunk: number;
  /** Prefill speed in tokens per simulated second (`--prefill-tps`, 8000). */
  prefillTps: number;
  /** Decode step time with an empty batch, ms (`--decode-base-ms`, 6). */
  decodeBaseMs: number;
  /** Extra decode step time per running request, ms (`--decode-per-req-ms`, 0.35). */
  decodePerReqMs: number;
  /** Wall ms per simulated ms: 1 is real time, 0.1 ten times faster, 0 instant (`--time-scale`, 1). */
  timeScale: number;
}

/** One generation request, already tokenized. */
export interface GenerateInput {
  /** Prompt token ids. */
  tokens: readonly number[];
  /** Tokens to generate (the engine never stops early). */
  maxNewTokens: number;
  /** Aborts the request: it leaves the queue or batch and frees its KV. */
  signal?: AbortSignal;
  /**
   * The prompt's KV arrives from a prefill worker (PD decode side): no prefill work, the first
   * token comes after one step. Default false.
   */
  kvTransferred?: boolean;
  /**
   * Sample (the request's `temperature` is above 0): tokens drawn with a seed from the engine's
   * random source. Default false: greedy, each token a function of every token before it.
   */
  sample?: boolean;
}

/** How a request ended. */
export interface GenerateResult {
  /** Prompt tokens. */
  promptTokens: number;
  /** Prompt tokens found in the prefix cache at admission. */
  cachedTokens: number;
  /** Tokens generated. */
  completionTokens: number;
  /** `length` when all tokens were generated, `abort` when the signal fired. */
  finishReason: "length" | "abort";
  /** Simulated ms from submit to the first token (null if aborted before it). */
  ttftMs: number | null;
  /** Simulated ms spent waiting for admission. */
  queueMs: number;
}

/** A point-in-time view of the engine, for `/v1/loads`, `/get_load` and `/metrics`. */
export interface EngineStats {
  /** Requests in the running batch. */
  running: number;
  /** Requests waiting for admission. */
  waiting: number;
  /** Uncached prompt tokens of the waiting requests. */
  waitingUncachedTokens: number;
  /**
   * KV tokens in use, as sglang counts them: capacity − free − evictable, i.e. the blocks pinned
   * by running requests plus their unblocked tokens. Cached blocks nobody runs on are free to
   * evict and do not count (sglang's `token_usage` falls back to ~0 on an idle engine).
   */
  usedTokens: number;
  /** KV tokens resident: every cached block plus running requests' unblocked tokens. */
  residentTokens: number;
  /** KV capacity in tokens. */
  maxTokens: number;
  /** usedTokens / maxTokens. */
  tokenUsage: number;
  /** Decode tokens per wall second, smoothed, as of the last decode step (held while idle). */
  genThroughput: number;
  /** Smoothed cached/prompt ratio over admitted requests. */
  cacheHitRate: number;
  /** The running batch's cap (the `maxRunning` setting, sglang's `max_running_requests`). */
  maxRunning: number;
  /** Cumulative counters since start. */
  totals: {
    /** Requests finished or aborted. */
    requests: number;
    /** Prompt tokens of admitted requests. */
    promptTokens: number;
    /** Of those, found in the cache. */
    cachedTokens: number;
    /** Tokens generated. */
    generatedTokens: number;
    /** Requests aborted by their client. */
    aborted: number;
    /** Requests that got their first token. */
    firstTokens: number;
    /** Σ simulated ms from submit to the first token over those requests. */
    ttftMs: number;
  };
}
