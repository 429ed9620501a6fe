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
 * over the real `Worker` records (made by the real `WorkerManager`); the proxy's own
 * `WorkerLedger` charges the pick at once (in flight, sticky key, prefill backlog), discharges
 * the backlog at the first token and the in-flight slot at the end, and takes the answer's usage
 * (characters per token learned, the prediction checked, `note.onReport` for tree feedback). The
 * load monitor is `loads.ts`.
 *
 * Known gaps: no retries, admission queue, breaker trips or timeouts (nothing fails here); a
 * request aborted by the drain reports no usage, as a cut stream does not; KV-event mode and
 * gRPC workers (tokens at the gateway) are not modelled.
 */

import type { GatewayConfig } from "../../../lib/config/config.ts";
import type { Random } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { SelectionNote } from "../../../lib/core/types.ts";
import { Metrics } from "../../../lib/metrics/metrics.ts";
import { CounterSeries } from "../../../lib/metrics/fast.ts";
import { createPolicy, type Policy } from "../../../lib/policies/mod.ts";
import { NO_OBSERVER } from "../../../lib/policies/policy.ts";
import type { PolicyReplicas } from "../../../lib/policies/replicas.ts";
import { WorkerLedger } from "../../../lib/proxy/ledger.ts";
import { ProxyMetrics } from "../../../lib/proxy/series.ts";
import { newNote, type SelectEnv, selectWorker } from "../../../lib/proxy/select.ts";
import type { CallContext } from "../../../lib/proxy/types.ts";
import { promptTokens } from "../../../lib/policies/expected_wait.ts";
import { extractRouteRequest } from "../../../lib/requests/route_request.ts";
import type { SimEngine } from "../../../lib/sim/engine.ts";
import { WorkerManager } from "../../../lib/workers/manager.ts";
import { WorkerRegistry } from "../../../lib/workers/registry.ts";
import { TextRatios } from "../../../lib/workers/text_ratios.ts";
import type { Worker } from "../../../lib/workers/worker.ts";
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
  /** Its policies' shared state, when it is one of several routers on a mesh (`mesh.ts`). */
  replicas?: PolicyReplicas;
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
  readonly #ledger: WorkerLedger;

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
      replicas: o.replicas,
    });
    if (o.replicas) o.replicas.mainFor = () => this.policy;
    // The gateway's own records and bookkeeping: workers as the manager makes them, charged,
    // freed and told of the answers' usage by the proxy's ledger.
    const manager = new WorkerManager({
      registry: new WorkerRegistry(),
      health: config.health,
      circuitBreaker: config.circuitBreaker,
      clock,
      log: silentLogger,
      newId: (() => {
        let n = 0;
        return () => `worker-${++n}`;
      })(),
    });
    this.workers = o.urls.map((url, i) => {
      const w = manager.add({ url, models: [MODEL] });
      w.setStatus("ready");
      w.kvCapacity = o.engines[i].config.kvTokens; // `/get_server_info`'s max_total_num_tokens
      return w;
    });
    this.#env = {
      clock,
      shed: new CounterSeries(),
      overloadedRetryAfter: config.loadMonitor.intervalSecs,
    };
    this.#ledger = new WorkerLedger(
      new ProxyMetrics(new Metrics()),
      clock,
      config.requestTimeoutSecs * 1000,
      this.ratios,
    );
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
    // What the ledger reads of a call: its inputs, its notes, no trace.
    const c = {
      rr,
      notes: new Map([[worker.id, note]]),
      ctx: {},
      spans: null,
    } as unknown as CallContext;
    const slot = this.#ledger.hold(c, worker);
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
    if (ok) prediction = this.#reported(c, note, worker, result.promptTokens, result.cachedTokens);
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

  /**
   * The answer's usage through the ledger (characters per token learned, the worker's counts, the
   * prediction checked and the tree corrected), and the check as `cache_prediction.ts` makes it.
   */
  #reported(
    c: CallContext,
    note: SelectionNote,
    worker: Worker,
    prompt: number,
    cached: number,
  ): PredictionCheck | null {
    this.#ledger.reported(c, worker, { prompt, cached });
    const estimate = promptTokens(c.rr);
    if (note.predictedCached === null || estimate <= 0 || prompt <= 0) return null;
    const predicted = Math.min(1, note.predictedCached / estimate);
    const actual = Math.min(1, cached / prompt);
    return {
      error: actual - predicted,
      predicted: Math.round(predicted * prompt),
      reported: cached,
    };
  }
}
