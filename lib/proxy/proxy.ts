/**
 * The inference path: admission → body read once → validation and routing inputs → candidate
 * workers for the model → eligibility (decided once per attempt) → policy → dispatch with the
 * same bytes → response relayed untouched (SSE through `relaySse`).
 *
 * Failures: a connect error, 5xx, 408 or 429 is retried after a jittered backoff on a worker
 * that has not failed this request yet (upstream may re-pick the failed one); a stream is
 * retried only before its first byte reached the client. The last failure is returned as the
 * worker sent it, or as a gateway error (502 unreachable, 504 timeout). One deadline
 * (`--request-timeout-secs`) covers the whole request, stream included; a client that leaves
 * cancels the worker request.
 *
 * Everything a request holds (admission slot, in-flight count, deadline, abort listener) is
 * released once, when `ctx.completed` settles: the response was delivered or abandoned.
 */

import type { GatewayConfig } from "../config/config.ts";
import { type Clock, type Random, sleep } from "../core/clock.ts";
import { errorResponse, GatewayError } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import type { Endpoint, RouteRequest } from "../core/types.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { Policy } from "../policies/policy.ts";

/** Which policy routes a model. */
export interface PolicyLookup {
  /** The policy for `model` (null: any model). */
  forModel(model: string | null): Policy;
}
import { extractRouteRequest } from "../routing/route_request.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { Admission } from "./admission.ts";
import { parseJson, readBody } from "./body.ts";
import { Deadlines } from "./deadlines.ts";
import { Holds, ProxyMetrics, type RouteSeries } from "./proxy_metrics.ts";
import { backoffMs, maxAttempts } from "./retry.ts";
import {
  type CallContext,
  Calls,
  CLIENT_CLOSED,
  type Failure,
  finalResponse,
  timeoutError,
} from "./attempt.ts";
import { PdDispatch } from "./pd.ts";
import { noCandidates, selectWorker } from "./select.ts";

/** The `fetch` the proxy calls; injectable for tests. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

/** What the proxy is built from. */
export interface ProxyDeps {
  /** Gateway configuration. */
  config: GatewayConfig;
  /** The worker registry. */
  registry: WorkerRegistry;
  /** The routing policies by model. */
  policies: PolicyLookup;
  /** Metrics. */
  metrics: Metrics;
  /** Logger (module `proxy`). */
  log: Logger;
  /** Clock for breaker, deadline and latency readings. */
  clock: Clock;
  /** Randomness for backoff jitter. */
  random: Random;
  /** HTTP client toward workers. */
  fetch: FetchFn;
  /** Admission control. */
  admission: Admission;
  /** PD mode: the leg policies; absent for regular routing. */
  pd?: PdPolicies;
}

/** The policies of the two PD legs. */
export interface PdPolicies {
  /** Picks the prefill worker. */
  prefill: Policy;
  /** Picks the decode worker. */
  decode: Policy;
}

/** Per-request context from the server. */
export interface RequestContext {
  /** The request id echoed as `x-request-id`. */
  requestId: string;
  /** Settles once the response is delivered or abandoned. */
  completed: Promise<unknown>;
}

class DeadlineExceeded extends Error {}

/** The inference request handler. */
export class InferenceProxy {
  readonly #d: ProxyDeps;
  readonly #timeoutMs: number;
  readonly #deadlines: Deadlines;
  readonly #pm: ProxyMetrics;
  readonly #calls: Calls;
  readonly #pd: PdDispatch | null;

  /** Builds the handler over its dependencies. */
  constructor(deps: ProxyDeps) {
    this.#d = deps;
    this.#timeoutMs = deps.config.requestTimeoutSecs * 1000;
    this.#pm = new ProxyMetrics(deps.metrics);
    this.#calls = new Calls(deps, this.#pm, this.#timeoutMs);
    this.#pd = deps.pd ? new PdDispatch(deps, this.#calls, deps.pd, this.#timeoutMs) : null;
    this.#deadlines = new Deadlines(deps.clock, Math.min(1000, Math.max(5, this.#timeoutMs / 20)));
  }

  /** Stops the deadline timer (shutdown, tests). */
  close(): void {
    this.#deadlines.stop();
  }

  /** Handles one inference request on `endpoint`. */
  async handle(req: Request, endpoint: Endpoint, ctx: RequestContext): Promise<Response> {
    const d = this.#d;
    const start = d.clock.now();
    const holds = new Holds();
    ctx.completed.then(holds.done, holds.done);
    let series: RouteSeries | null = null;
    try {
      const slot = d.admission.acquire(req.signal);
      holds.add(slot instanceof Promise ? await slot : slot);
      const bytes = await readBody(req, d.config.maxPayloadSize);
      const body = parseJson(bytes);
      const rr = extractRouteRequest(endpoint, body, req.headers, {
        routingKeyHeaders: d.config.routingKeyHeaders,
        routingKeyOverride: d.config.routingKeyOverride,
      });
      series = this.#pm.route(rr, d.policies.forModel(rr.model).name);
      series.requests[rr.stream ? 1 : 0].inc();
      const res = await this.#dispatch(req, rr, body, bytes, ctx, holds, start, series);
      const ms = d.clock.now() - start;
      if (res.status < 400) series.duration.observe(ms / 1000);
      else this.#pm.error(series, res.status);
      if (d.log.enabled("debug")) {
        d.log.debug("request routed", {
          request_id: ctx.requestId,
          endpoint,
          model: rr.model,
          stream: rr.stream,
          status: res.status,
          worker: res.headers.get("x-smg-routed-worker-id") ?? undefined,
          head_ms: Math.round(ms * 10) / 10,
        });
      }
      return res;
    } catch (e) {
      const err = e instanceof GatewayError
        ? e
        : new GatewayError(500, "internal_error", String(e));
      if (err.status === 500) d.log.error("request failed", { request_id: ctx.requestId, err });
      else if (d.log.enabled("debug")) {
        d.log.debug("request refused", {
          request_id: ctx.requestId,
          endpoint,
          status: err.status,
          code: err.code,
        });
      }
      if (series) this.#pm.error(series, err.status);
      return errorResponse(err, ctx.requestId);
    }
  }

  async #dispatch(
    req: Request,
    rr: RouteRequest,
    body: unknown,
    bytes: Uint8Array<ArrayBuffer>,
    ctx: RequestContext,
    holds: Holds,
    start: number,
    series: RouteSeries,
  ): Promise<Response> {
    const d = this.#d;
    // One controller cancels the worker request: on client disconnect or at the deadline.
    const cancel = new AbortController();
    const onClientGone = () => cancel.abort(req.signal.reason);
    req.signal.addEventListener("abort", onClientGone, { once: true });
    const deadline = this.#deadlines.add(
      start + this.#timeoutMs,
      () => cancel.abort(new DeadlineExceeded("request timeout")),
    );
    holds.add(() => {
      this.#deadlines.remove(deadline);
      req.signal.removeEventListener("abort", onClientGone);
    });
    const signal = cancel.signal;
    const timedOut = () => signal.reason instanceof DeadlineExceeded;
    const call: CallContext = { req, rr, ctx, holds, start, series, signal, timedOut };
    if (this.#pd) return await this.#pd.dispatch(call, body as Record<string, unknown>);

    const candidates = d.registry.forModel(rr.model);
    if (candidates.length === 0) throw noCandidates(d, rr);

    const attempts = maxAttempts(d.config.retry);
    const failed = new Set<string>();
    let last: Failure | null = null;
    const ep = series.labels[4];
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        const delay = backoffMs(attempt - 1, d.config.retry, d.random);
        d.metrics.retries.with("regular", ep).inc();
        d.metrics.retryBackoff.with(String(attempt)).observe(delay / 1000);
        try {
          await sleep(delay, signal);
        } catch {
          break;
        }
      }
      const worker = selectWorker(
        d,
        candidates,
        failed,
        rr,
        last !== null,
        d.policies.forModel(rr.model),
      );
      if (!worker) break;
      series.selection.inc();
      const sent = await this.#calls.send(call, worker, bytes);
      const result = "res" in sent ? await this.#calls.respond(call, worker, sent) : sent;
      if ("response" in result) return result.response;
      failed.add(worker.id);
      last = result.failure;
      if (!last.retryable) break;
      d.log.warn("attempt failed; retrying on another worker", {
        request_id: ctx.requestId,
        worker: worker.url,
        status: last.worker?.status ?? last.error?.status,
        attempt: attempt + 1,
      });
    }
    if (req.signal.aborted) return new Response(null, { status: CLIENT_CLOSED });
    if (timedOut() && (!last || last.retryable)) {
      last = { retryable: false, error: timeoutError(this.#timeoutMs) };
    }
    if (last?.retryable && attempts > 1) d.metrics.retriesExhausted.with("regular", ep).inc();
    return finalResponse(last!, ctx.requestId);
  }
}
