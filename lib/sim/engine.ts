/**
 * The simulated inference engine: token ids in, generated token ids out at the pace of a
 * continuously batching engine with a finite prefix KV cache (sglang's scheduler, simplified).
 *
 * One scheduler loop runs while anything is queued or running and stops (no timer) otherwise.
 * Each step: (1) running requests with prompt left continue their chunked prefill, in admission
 * order, within `prefillChunk` tokens; (2) while prefill budget is left, waiting requests are
 * admitted in FIFO order if the batch has room and the KV pool can hold the uncached prompt plus
 * `maxNewTokens` (an empty engine admits anything); admission pins the cached prefix; (3) every
 * request whose prefill finished in an earlier step decodes one token; (4) the step lasts
 * max(prefill tokens / prefillTps, decodeBaseMs + decodePerReqMs × decoding) simulated ms, and its
 * tokens are emitted at its end, so a prompt whose prefill ends in a step gets its first token
 * then. Full blocks of the prompt join the cache as prefill computes them (as sglang's radix
 * cache does, so a concurrent request can share them); a finished or aborted request adds its
 * computed tokens (prompt and all but the last generated token, whose KV is never computed) and
 * unpins. As in sglang and vLLM, the last prompt token is never served from cache, so a fully
 * cached prompt still prefills one block's worth at most.
 *
 * Known gaps: admission reserves the whole `maxNewTokens` (sglang estimates and preempts
 * instead); a mixed prefill+decode step costs the larger of the two, not their sum; there is no
 * per-step overhead beyond `decodeBaseMs`. Simulated time and `timeScale` live in `Pacer`.
 */

import { ewma, RateMeter } from "./smoothing.ts";
import { blockKeys, KvCache } from "./kv_cache.ts";
import { KvEventLog } from "./kv_events.ts";
import { Pacer, type PacerDeps } from "./pacer.ts";
import { type SimTokenizer, WORD_TOKENIZER } from "./tokenizer.ts";
import type { EngineConfig, EngineStats, GenerateInput, GenerateResult } from "./types.ts";
import { checkEngineConfig } from "./engine_config.ts";
import type { Sequence } from "./sequence.ts";

/**
 * What the engine needs from outside: a wall clock and sleeper (see `Pacer`), a seed source and
 * what its generated tokens are.
 */
export interface EngineDeps extends PacerDeps {
  /** Draws the sampling seed of a request that samples (`GenerateInput.sample`). */
  random?: () => number;
  /** What generated tokens are (default `WORD_TOKENIZER`'s words and spaces). */
  tokenizer?: Pick<SimTokenizer, "generator">;
}

/** Weight of the newest admitted request in `cacheHitRate`. */
const HIT_RATE_ALPHA = 0.1;

/** A continuously batching engine simulator with a prefix KV cache. */
export class SimEngine {
  #cfg: EngineConfig;
  #deps: EngineDeps;
  #cache: KvCache;
  #pacer: Pacer;
  #waiting: Sequence[] = [];
  #running: Sequence[] = [];
  #loop: Promise<void> | null = null;
  #closer = new AbortController();
  #throughput = new RateMeter();
  #hitRate: number | null = null;
  #totals = noTotals();
  readonly #finished = new Set<() => void>();
  /** The engine's settings (a copy). */
  get config(): EngineConfig {
    return { ...this.#cfg };
  }

  /** The KV events of the cache (blocks stored, evicted, cleared), numbered in batches. */
  readonly kvEvents = new KvEventLog();

  /** An idle engine; throws a RangeError on an invalid config. */
  constructor(cfg: EngineConfig, deps: EngineDeps) {
    checkEngineConfig(cfg);
    this.#cfg = { ...cfg };
    this.#deps = deps;
    this.#cache = new KvCache({
      blockSize: cfg.blockSize,
      capacityTokens: cfg.kvTokens,
      onEvent: (e) => this.kvEvents.add(e),
    });
    this.#pacer = new Pacer(cfg.timeScale, deps);
  }

  /**
   * Queues a request; `onToken` gets each generated token (id, index, text) at the end of the
   * step that made it.
   * Resolves when it finishes or aborts; rejects on an empty prompt, a bad `maxNewTokens`, or a
   * closed engine. If `onToken` throws, the request aborts (as when a client goes away).
   */
  submit(
    input: GenerateInput,
    onToken: (tokenId: number, index: number, piece: string) => void,
  ): Promise<GenerateResult> {
    const { tokens, maxNewTokens, signal } = input;
    if (this.#closer.signal.aborted) return Promise.reject(new Error("the engine is closed"));
    if (tokens.length === 0) return Promise.reject(new RangeError("the prompt has no tokens"));
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0) {
      return Promise.reject(new RangeError(`maxNewTokens ${maxNewTokens} is not an integer >= 0`));
    }
    const bs = this.#cfg.blockSize;
    return new Promise((resolve) => {
      // Greedy unless asked to sample (each token a function of those before it).
      const random = input.sample ? this.#deps.random : undefined;
      const seed = random ? Math.floor(random() * 2 ** 32) : undefined;
      const seq: Sequence = {
        tokens,
        keys: blockKeys(tokens, bs),
        matchable: Math.floor((tokens.length - 1) / bs),
        maxNew: maxNewTokens,
        transferred: input.kvTransferred === true,
        next: (this.#deps.tokenizer ?? WORD_TOKENIZER).generator(tokens, seed),
        onToken,
        phase: "waiting",
        submitAt: this.#pacer.simNow(),
        admitAt: null,
        firstTokenAt: null,
        cached: 0,
        computed: 0,
        pinned: 0,
        reserved: 0,
        out: [],
        resolve,
      };
      if (signal?.aborted) return this.#finish(seq, "abort");
      if (signal) {
        const onAbort = () => this.#finish(seq, "abort");
        signal.addEventListener("abort", onAbort, { once: true });
        seq.unlisten = () => signal.removeEventListener("abort", onAbort);
      }
      this.#waiting.push(seq);
      this.#loop ??= this.#run();
    });
  }

  /** A snapshot of load, cache use and cumulative counters. */
  stats(): EngineStats {
    const bs = this.#cfg.blockSize;
    let waitingUncached = 0;
    for (const s of this.#waiting) {
      waitingUncached += s.tokens.length - this.#cache.matchKeys(s.keys, s.matchable) * bs;
    }
    let privateTokens = 0;
    for (const s of this.#running) privateTokens += kvLength(s) - s.pinned * bs;
    const residentTokens = this.#cache.blockTokens + privateTokens;
    const usedTokens = residentTokens - this.#cache.evictableTokens;
    return {
      running: this.#running.length,
      waiting: this.#waiting.length,
      waitingUncachedTokens: waitingUncached,
      usedTokens,
      residentTokens,
      maxTokens: this.#cfg.kvTokens,
      tokenUsage: usedTokens / this.#cfg.kvTokens,
      // Held while idle, as sglang's: a decayed reading would make an idle worker look slow.
      genThroughput: this.#throughput.last(),
      cacheHitRate: this.#hitRate ?? 0,
      maxRunning: this.#cfg.maxRunning,
      totals: { ...this.#totals },
    };
  }

  /** Calls `listener` after each request ends (finished or aborted); returns its removal. */
  onFinish(listener: () => void): () => void {
    this.#finished.add(listener);
    return () => this.#finished.delete(listener);
  }

  /** Drops every cached block, as sglang's /flush_cache: false (and nothing done) while busy. */
  flushCache(): boolean {
    if (this.#running.length > 0 || this.#waiting.length > 0) return false;
    this.#cache.flush();
    return true;
  }

  /** Stops the loop and aborts every pending request; resolves once the loop has exited. */
  close(): Promise<void> {
    if (!this.#closer.signal.aborted) {
      this.#closer.abort();
      for (const s of [...this.#running, ...this.#waiting]) this.#finish(s, "abort", false);
    }
    return this.#loop ?? Promise.resolve();
  }

  async #run(): Promise<void> {
    await Promise.resolve(); // requests submitted in the same tick join the first step
    this.#pacer.resume();
    while (!this.#closer.signal.aborted && this.#running.length + this.#waiting.length > 0) {
      await this.#step();
    }
    this.#loop = null;
  }

  async #step(): Promise<void> {
    const cfg = this.#cfg;
    let budget = cfg.prefillChunk;
    const prefill: [Sequence, number][] = [];
    const decoding: Sequence[] = [];
    for (const s of this.#running) {
      const left = s.tokens.length - s.computed;
      if (left === 0) decoding.push(s);
      else if (budget > 0) budget -= push(prefill, s, Math.min(budget, left));
    }
    while (budget > 0 && this.#waiting.length > 0 && this.#running.length < cfg.maxRunning) {
      const s = this.#waiting[0];
      if (!this.#admit(s)) break;
      budget -= push(prefill, s, Math.min(budget, s.tokens.length - s.computed));
    }
    const prefillTokens = cfg.prefillChunk - budget;
    const ms = Math.max(
      (prefillTokens / cfg.prefillTps) * 1000,
      decoding.length > 0 ? cfg.decodeBaseMs + cfg.decodePerReqMs * decoding.length : 0,
    );
    try {
      await this.#pacer.step(ms, this.#closer.signal);
    } catch (err) {
      if (this.#closer.signal.aborted) return;
      throw err;
    }
    if (this.#closer.signal.aborted) return;
    for (const [s, n] of prefill) {
      if (s.phase !== "running") continue;
      s.computed += n;
      this.#pinComputed(s);
      if (s.computed === s.tokens.length) this.#emit(s);
    }
    let decoded = 0;
    for (const s of decoding) {
      if (s.phase === "running") decoded += this.#emit(s);
    }
    if (decoded > 0) this.#throughput.add(decoded, this.#deps.now());
  }

  /** Moves the queue head into the batch if the KV pool can hold it; false if it must wait. */
  #admit(s: Sequence): boolean {
    const bs = this.#cfg.blockSize;
    const blocks = this.#cache.matchKeys(s.keys, s.matchable);
    const need = s.tokens.length - blocks * bs + s.maxNew;
    const empty = this.#running.length === 0;
    if (!empty && !this.#cache.fits(need, s.keys, blocks)) return false;
    this.#cache.pin(s.keys, 0, blocks, s.tokens);
    this.#cache.reserve(need, true);
    s.pinned = blocks;
    s.cached = s.computed = blocks * bs;
    s.reserved = need;
    if (s.transferred) {
      s.computed = s.tokens.length;
      this.#pinComputed(s);
    }
    s.phase = "running";
    s.admitAt = this.#pacer.simNow();
    this.#waiting.shift();
    this.#running.push(s);
    this.#totals.promptTokens += s.tokens.length;
    this.#totals.cachedTokens += s.cached;
    this.#hitRate = ewma(this.#hitRate, s.cached / s.tokens.length, HIT_RATE_ALPHA);
    return true;
  }

  /** Turns the newly computed full prompt blocks from reserved tokens into pinned cache blocks. */
  #pinComputed(s: Sequence): void {
    const bs = this.#cfg.blockSize;
    const target = Math.floor(s.computed / bs);
    if (target <= s.pinned) return;
    this.#cache.unreserve((target - s.pinned) * bs);
    const reached = this.#cache.pin(s.keys, s.pinned, target, s.tokens);
    this.#cache.reserve((target - reached) * bs, true);
    s.reserved -= (reached - s.pinned) * bs;
    s.pinned = reached;
  }

  /** Stamps `s`'s first token (once) and adds its time to first token to the totals. */
  #firstToken(s: Sequence): void {
    if (s.firstTokenAt !== null) return;
    s.firstTokenAt = this.#pacer.simNow();
    this.#totals.firstTokens++;
    this.#totals.ttftMs += s.firstTokenAt - s.submitAt;
  }

  /** Emits the next token of `s` and finishes it if that was the last; returns tokens emitted. */
  #emit(s: Sequence): number {
    const index = s.out.length;
    if (index >= s.maxNew) {
      this.#firstToken(s);
      this.#finish(s, "length");
      return 0;
    }
    const { id, piece } = s.next();
    s.out.push(id);
    this.#firstToken(s);
    this.#totals.generatedTokens++;
    try {
      s.onToken(id, index, piece);
    } catch {
      this.#finish(s, "abort");
      return 1;
    }
    if (s.phase === "running" && s.out.length >= s.maxNew) this.#finish(s, "length");
    return 1;
  }

  /** Ends `s`: frees its place and KV, caches what it computed, and resolves its result. */
  #finish(s: Sequence, reason: GenerateResult["finishReason"], byClient = true): void {
    if (s.phase === "done") return;
    const now = this.#pacer.simNow();
    if (s.phase === "waiting") {
      this.#waiting.splice(this.#waiting.indexOf(s), 1);
    } else {
      this.#running.splice(this.#running.indexOf(s), 1);
      this.#cache.unreserve(s.reserved);
      const computed = s.computed < s.tokens.length
        ? s.tokens.slice(0, s.computed)
        : [...s.tokens, ...s.out.slice(0, -1)];
      const keys = blockKeys(computed, this.#cfg.blockSize);
      this.#cache.unpin(keys, this.#cache.pin(keys, s.pinned, keys.length, computed));
    }
    s.phase = "done";
    s.unlisten?.();
    this.#totals.requests++;
    if (reason === "abort" && byClient) this.#totals.aborted++;
    s.resolve({
      promptTokens: s.tokens.length,
      cachedTokens: s.cached,
      completionTokens: s.out.length,
      finishReason: reason,
      ttftMs: s.firstTokenAt === null ? null : s.firstTokenAt - s.submitAt,
      queueMs: (s.admitAt ?? now) - s.submitAt,
    });
    for (const l of this.#finished) l();
  }
}

/** An engine's cumulative counters before its first request. */
export function noTotals(): EngineStats["totals"] {
  return {
    requests: 0,
    promptTokens: 0,
    cachedTokens: 0,
    generatedTokens: 0,
    aborted: 0,
    firstTokens: 0,
    ttftMs: 0,
  };
}

/** Appends `[s, n]` to `plan` and returns `n`. */
function push(plan: [Sequence, number][], s: Sequence, n: number): number {
  plan.push([s, n]);
  return n;
}

/** Tokens of `s` whose KV exists: the computed prompt and every generated token but the last. */
function kvLength(s: Sequence): number {
  return s.computed + Math.max(0, s.out.length - 1);
}
