/**
 * A mini gateway around one real policy, in front of in-process `SimEngine`s on a virtual clock:
 * what `lib/proxy` does for HTTP workers on the regular path, minus the network. In: chat calls
 * (the user message, the worker's token ids of it, `max_tokens`, headers). Out: per call, the
 * worker picked, the client's TTFT and end-to-end time in virtual ms, the engine's prompt and
 * cached tokens, and the cache-prediction check.
 *
 * Per call, as the proxy does (`proxy.ts`, `regular.ts`, `select.ts`, `ledger.ts`,
 * `http/leg.ts`, `cache_prediction.ts`): the `RouteRequest` is extracted from the body with the
 * model's learned characters per token (`extractRouteRequest`, `TextRatios.forModel`); a fresh
 * `SelectionNote` (`newNote`: the prompt's token estimate to prefill) goes to `selectWorker`
 * over the real `Worker` records; the pick is charged at once (in flight, sticky key, prefill
 * backlog); the backlog is discharged at the first token and the in-flight slot at the end; the
 * answer's usage teaches characters per token (routing text length vs the engine's prompt
 * tokens) and is checked against the pick's prediction by the real `CachePredictions`, which
 * calls `note.onReport` (tree feedback). The load monitor is `loads.ts`.
 *
 * Known gaps: no retries, admission queue, breaker trips or timeouts (nothing fails here); a
 * request aborted by the drain reports no usage, as a cut stream does not; KV-event mode and
 * gRPC workers (tokens at the gateway) are not modelled.
 */

import type { GatewayConfig } from "../../../lib/config/config.ts";
import type { Random } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { RouteRequest, SelectionNote } from "../../../lib/core/types.ts";
import type { Metrics } from "../../../lib/metrics/metrics.ts";
import { CounterSeries } from "../../../lib/metrics/fast.ts";
import { createPolicy, type Policy } from "../../../lib/policies/mod.ts";
import { NO_OBSERVER } from "../../../lib/policies/policy.ts";
import { CachePredictions } from "../../../lib/proxy/cache_prediction.ts";
import { newNote, type SelectEnv, selectWorker } from "../../../lib/proxy/select.ts";
import { extractRouteRequest } from "../../../lib/requests/route_request.ts";
import type { SimEngine } from "../../../lib/sim/engine.ts";
import { CircuitBreaker } from "../../../lib/workers/circuit_breaker.ts";
import { TextRatios } from "../../../lib/workers/text_ratios.ts";
import { Worker } from "../../../lib/workers/worker.ts";
import type { VirtualClock } from "./clock.ts";
import { monitorsLoads, runLoadMonitor } from "./loads.ts";

/** The model every call names, as the routing benchmark's workers serve it. */
export const MODEL = "sim-model";

/** One chat completion as the client sends it. */
export interface ChatCall {
  /** The user message (the routing text). */
  content: string;
  /** The prompt as the worker tokenizes it (its chat template, its tokenizer). */
  tokens: readonly number[];
  /** `max_tokens`. */
  maxTokens: number;
  /** Request headers (a reference's routing key). */
  headers?: Record<string, string>;
  /** Aborts the call (the drain timeout). */
  signal?: AbortSignal;
}

/** One call's outcome, as the client and the gateway saw it. */
export interface CallOutcome {
  /** Index of the worker picked. */
  worker: number;
  /** Finished with all its tokens. */
  ok: boolean;
  /** Virtual ms from the call to its first token, or null. */
  ttftMs: number | null;
  /** Virtual ms from the call to its end. */
  e2eMs: number;
  /** The engine's prompt tokens and those it found cached. */
  promptTokens: number;
  cachedTokens: number;
  /** The prediction check (`cache_prediction.ts`), or null when the pick predicted nothing. */
  prediction: PredictionCheck | null;
}

/** A call no worker was picked for. */
const FAILED: CallOutcome = {
  worker: -1,
  ok: false,
  ttftMs: null,
  e2eMs: 0,
  promptTokens: 0,
  cachedTokens: 0,
  prediction: null,
};

/** One request's prediction against the worker's report. */
export interface PredictionCheck {
  /** Reported − predicted cached share of the prompt (the histogram's observation). */
  error: number;
  /** Cached tokens predicted (share × reported prompt, rounded) and reported. */
  predicted: number;
  reported: number;
}

/** What the gateway is built from. */
export interface VirtualGatewayOptions {
  /** The gateway's settings (validated); `policy` names the policy. */
  config: GatewayConfig;
  /** The virtual clock everything runs on. */
  clock: VirtualClock;
  /** One engine per worker, in worker order. */
  engines: readonly SimEngine[];
  /** Worker base URLs, same order (hash rings and cache trees key on them). */
  urls: readonly string[];
  /** The policy's randomness (the gateway's `--random-seed`). */
  random: Random;
  /**
   * Virtual ms between the pick and the engine's submit (default 0): what the real path spends
   * there, two HTTP hops and the worker parsing, templating and tokenizing the prompt.
   */
  submitDelayMs?: number;
}

/** The gateway: a policy, its workers' records and their engines. */
export class VirtualGateway {
  /** The workers' records, as the registry holds them. */
  readonly workers: readonly Worker[];
  /** The policy instance. */
  readonly policy: Policy;
  /** Characters per token learned from the answers. */
  readonly ratios = new TextRatios();
  readonly #o: VirtualGatewayOptions;
  readonly #env: SelectEnv;
  readonly #predictions: CachePredictions;
  /** Where the prediction stub writes the check of the call being answered (synchronous). */
  #check: PredictionCheck | null = null;

  /** Builds the policy and one ready worker record per engine (capacity from its config). */
  constructor(o: VirtualGatewayOptions) {
    if (o.engines.length !== o.urls.length) throw new Error("one URL per engine");
    this.#o = o;
    const { config, clock } = o;
    this.policy = createPolicy(config.policy, {
      random: o.random,
      now: () => clock.now(),
      log: silentLogger,
      config,
      observer: NO_OBSERVER,
    });
    const cb = config.circuitBreaker;
    this.workers = o.urls.map((url, i) => {
      const breaker = new CircuitBreaker({
        failureThreshold: cb.failureThreshold,
        successThreshold: cb.successThreshold,
        openMs: cb.timeoutSecs * 1000,
        windowMs: cb.windowSecs * 1000,
        disabled: cb.disabled,
      });
      const w = new Worker(`worker-${i + 1}`, { url, models: [MODEL] }, breaker, "ready", 0);
      w.kvCapacity = o.engines[i].config.kvTokens; // `/get_server_info`'s max_total_num_tokens
      return w;
    });
    this.#env = {
      clock,
      shed: new CounterSeries(),
      overloadedRetryAfter: config.loadMonitor.intervalSecs,
    };
    // The real check, over a stand-in for its two metric families: the observation and the
    // token counts of the call being answered are kept for the caller instead.
    const stub = {
      cachePredictionError: { with: () => ({ observe: (v: number) => this.#seen({ error: v }) }) },
      cachedTokens: {
        with: (_policy: string, source: string) => ({
          inc: (n: number) =>
            this.#seen(source === "predicted" ? { predicted: n } : { reported: n }),
        }),
      },
    };
    this.#predictions = new CachePredictions(stub as unknown as Metrics);
  }

  /** Whether the load monitor polls (`loads.ts`). */
  get monitorsLoads(): boolean {
    return monitorsLoads(this.#o.config.loadMonitor, this.policy);
  }

  /** Polls loads now and every interval until `signal` aborts, when the monitor is on. */
  startLoadMonitor(signal: AbortSignal): void {
    const { config, engines, clock } = this.#o;
    if (this.monitorsLoads) {
      runLoadMonitor(config.loadMonitor, this.workers, engines, clock, signal);
    }
  }

  /**
   * Routes `call`, runs it on the picked worker's engine, and resolves with its outcome; never
   * rejects (a refused call is a failed outcome).
   */
  async send(call: ChatCall): Promise<CallOutcome> {
    const clock = this.#o.clock;
    const start = clock.now();
    const body = {
      model: MODEL,
      messages: [{ role: "user", content: call.content }],
      max_tokens: call.maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    };
    const config = this.#o.config;
    const rr = extractRouteRequest("chat", body, new Headers(call.headers ?? {}), {
      routingKeyHeaders: config.routingKeyHeaders,
      routingKeyOverride: config.routingKeyOverride,
      charsPerToken: (model) => this.ratios.forModel(model),
    });
    const note = newNote(rr, true, this.policy.name);
    let worker: Worker;
    try {
      worker = selectWorker(this.#env, {
        candidates: this.workers,
        failed: new Set(),
        rr,
        retrying: false,
        policy: this.policy,
        note,
      })!;
    } catch {
      // A 503 (every worker vetoed, a target worker missing): the client's failed request.
      return { ...FAILED, e2eMs: clock.now() - start };
    }
    const index = this.workers.indexOf(worker);
    const slot = hold(worker, rr, note);
    let ttftMs: number | null = null;
    const delay = this.#o.submitDelayMs ?? 0;
    if (delay > 0) await clock.sleep(delay);
    const result = await this.#o.engines[index].submit(
      { tokens: call.tokens, maxNewTokens: call.maxTokens, signal: call.signal },
      (_id, i) => {
        if (i !== 0) return;
        slot.firstToken();
        ttftMs = clock.now() - start;
      },
    );
    const ok = result.finishReason === "length";
    let prediction: PredictionCheck | null = null;
    if (ok) prediction = this.#reported(rr, worker, note, result.promptTokens, result.cachedTokens);
    slot.release();
    return {
      worker: index,
      ok,
      ttftMs,
      e2eMs: clock.now() - start,
      promptTokens: result.promptTokens,
      cachedTokens: result.cachedTokens,
      prediction,
    };
  }

  /** `WorkerLedger.reported` for an answer routed on text: learn, add up, check. */
  #reported(
    rr: RouteRequest,
    worker: Worker,
    note: SelectionNote,
    prompt: number,
    cached: number,
  ): PredictionCheck | null {
    if (rr.tokens === null) {
      this.ratios.observe(rr.model ?? "unknown", worker, rr.text.length, prompt);
    }
    worker.reportedPromptTokens += prompt;
    worker.reportedCachedTokens += cached;
    this.#check = null;
    this.#predictions.check(note, rr, { prompt, cached });
    const c = this.#check as PredictionCheck | null;
    this.#check = null;
    return c;
  }

  #seen(part: Partial<PredictionCheck>): void {
    this.#check = { error: 0, predicted: 0, reported: 0, ...this.#check, ...part };
  }
}

/** A charged pick: the prefill backlog until the first token, the in-flight slot until the end. */
interface Slot {
  firstToken: () => void;
  release: () => void;
}

/** `WorkerLedger.hold` without its metrics: in flight, the sticky key, the prefill backlog. */
function hold(worker: Worker, rr: RouteRequest, note: SelectionNote): Slot {
  worker.inFlight++;
  worker.requestsTotal++;
  const releaseKey = rr.stickyKey === null ? null : worker.holdKey(rr.stickyKey);
  const firstToken = worker.chargePrefill(note.prefillTokens);
  let held = true;
  return {
    firstToken,
    release: () => {
      if (!held) return;
      held = false;
      worker.inFlight--;
      firstToken();
      releaseKey?.();
    },
  };
}
