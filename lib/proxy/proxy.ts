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
import { classifyStatus, type Outcome } from "../workers/circuit_breaker.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { Worker } from "../workers/worker.ts";
import type { Admission } from "./admission.ts";
import { parseJson, readBody } from "./body.ts";
import { Deadlines } from "./deadlines.ts";
import { clientHeaders, upstreamHeaders } from "./headers.ts";
import { Holds, ProxyMetrics, type RouteSeries } from "./proxy_metrics.ts";
import { relaySse } from "./relay.ts";
import { backoffMs, isRetryableStatus, maxAttempts } from "./retry.ts";

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
}

/** Per-request context from the server. */
export interface RequestContext {
  /** The request id echoed as `x-request-id`. */
  requestId: string;
  /** Settles once the response is delivered or abandoned. */
  completed: Promise<unknown>;
}

/** Worker paths per endpoint. */
export const ENDPOINT_PATHS: Record<Endpoint, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  generate: "/generate",
  embeddings: "/v1/embeddings",
  rerank: "/v1/rerank",
};

/** A failed attempt, kept in case it is the last. */
interface Failure {
  retryable: boolean;
  /** The worker's own error response, passed through verbatim if it is the last. */
  worker?: { status: number; headers: Headers; body: ArrayBuffer };
  /** Or the gateway's error. */
  error?: GatewayError;
}

type Attempt = { response: Response } | { failure: Failure };

class DeadlineExceeded extends Error {}
const CLIENT_CLOSED = 499;

/** The inference request handler. */
export class InferenceProxy {
  readonly #d: ProxyDeps;
  readonly #timeoutMs: number;
  readonly #deadlines: Deadlines;
  readonly #pm: ProxyMetrics;

  /** Builds the handler over its dependencies. */
  constructor(deps: ProxyDeps) {
    this.#d = deps;
    this.#timeoutMs = deps.config.requestTimeoutSecs * 1000;
    this.#pm = new ProxyMetrics(deps.metrics);
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
      const rr = extractRouteRequest(endpoint, parseJson(bytes), req.headers, {
        routingKeyHeaders: d.config.routingKeyHeaders,
        routingKeyOverride: d.config.routingKeyOverride,
      });
      series = this.#pm.route(rr, d.policies.forModel(rr.model).name);
      series.requests[rr.stream ? 1 : 0].inc();
      const res = await this.#dispatch(req, rr, bytes, ctx, holds, start, series);
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
    bytes: Uint8Array<ArrayBuffer>,
    ctx: RequestContext,
    holds: Holds,
    start: number,
    series: RouteSeries,
  ): Promise<Response> {
    const d = this.#d;
    const candidates = d.registry.forModel(rr.model);
    if (candidates.length === 0) {
      if (d.registry.size === 0) {
        throw new GatewayError(503, "no_available_workers", "no workers are registered", {
          retryAfter: 1,
        });
      }
      throw new GatewayError(404, "model_not_found", `no worker serves model '${rr.model}'`, {
        param: "model",
      });
    }

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
      const worker = this.#select(candidates, failed, rr, last !== null);
      if (!worker) break;
      series.selection.inc();
      const result = await this.#attempt(
        req,
        worker,
        rr,
        bytes,
        signal,
        timedOut,
        ctx,
        holds,
        start,
        series,
      );
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

  /** Eligible candidates that have not failed this request, then the policy's pick. */
  #select(
    candidates: readonly Worker[],
    failed: ReadonlySet<string>,
    rr: RouteRequest,
    retrying: boolean,
  ): Worker | null {
    const d = this.#d;
    const now = d.clock.now();
    const eligible: Worker[] = [];
    let overloaded = 0;
    for (const w of candidates) {
      if (failed.has(w.id)) continue;
      if (w.available(now)) eligible.push(w);
      else if (w.overloaded) overloaded++;
    }
    if (eligible.length === 0) {
      if (retrying) return null;
      if (overloaded > 0 && overloaded === candidates.length) {
        d.metrics.overloadShed.with("selection").inc();
        throw new GatewayError(
          503,
          "no_available_workers",
          "every worker for this model is overloaded",
          {
            retryAfter: d.config.loadMonitor.intervalSecs,
          },
        );
      }
      throw new GatewayError(
        503,
        "no_available_workers",
        `all ${candidates.length} workers for model '${
          rr.model ?? "any"
        }' are unavailable (unhealthy or circuit open)`,
        { retryAfter: 1 },
      );
    }
    const policy = d.policies.forModel(rr.model);
    const worker = policy.select(eligible, rr);
    if (!worker) {
      if (retrying) return null;
      throw new GatewayError(
        503,
        "no_available_workers",
        `policy ${policy.name} found no worker`,
        {
          retryAfter: 1,
        },
      );
    }
    return worker;
  }

  #record(worker: Worker, outcome: Outcome): void {
    worker.breaker.record(outcome, this.#d.clock.now());
    const s = this.#pm.worker(worker);
    s.outcome[outcome].inc();
    s.cbFailures.set(worker.breaker.consecutiveFailures);
  }

  async #attempt(
    req: Request,
    worker: Worker,
    rr: RouteRequest,
    bytes: Uint8Array<ArrayBuffer>,
    signal: AbortSignal,
    timedOut: () => boolean,
    ctx: RequestContext,
    holds: Holds,
    start: number,
    series: RouteSeries,
  ): Promise<Attempt> {
    const d = this.#d;
    const ws = this.#pm.worker(worker);
    worker.inFlight++;
    worker.requestsTotal++;
    ws.active.set(worker.inFlight);
    const releaseKey = rr.stickyKey === null ? null : worker.holdKey(rr.stickyKey);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      worker.inFlight--;
      releaseKey?.();
      ws.active.set(worker.inFlight);
    };
    const failure = (e: unknown, what: string): Attempt => {
      release();
      if (req.signal.aborted) {
        return { response: new Response(null, { status: CLIENT_CLOSED }) };
      }
      this.#record(worker, "failure");
      const late = timedOut();
      d.metrics.workerErrors.with(worker.type, "http", late ? "timeout" : "transport").inc();
      d.metrics.upstreamResponses.with("http", late ? "504" : "502", "call_upstream_failed").inc();
      if (late) return { failure: { retryable: false, error: timeoutError(this.#timeoutMs) } };
      const msg = `worker ${worker.url} ${what}: ${(e as Error)?.message ?? String(e)}`;
      return {
        failure: { retryable: true, error: new GatewayError(502, "call_upstream_failed", msg) },
      };
    };

    let res: Response;
    try {
      res = await d.fetch(worker.url + ENDPOINT_PATHS[rr.endpoint], {
        method: "POST",
        headers: upstreamHeaders(req.headers, ctx.requestId, worker.apiKey),
        body: bytes,
        signal,
      });
    } catch (e) {
      return failure(e, "unreachable");
    }
    const status = res.status;
    this.#pm.upstream(status);
    const outcome = classifyStatus(status);
    if (isRetryableStatus(status)) {
      let body = new ArrayBuffer(0);
      try {
        body = await res.arrayBuffer();
      } catch { /* the status is what matters */ }
      release();
      this.#record(worker, outcome);
      if (status >= 500) d.metrics.workerErrors.with(worker.type, "http", "status").inc();
      return { failure: { retryable: true, worker: { status, headers: res.headers, body } } };
    }

    if (rr.stream && status < 300 && res.body) {
      const reader = res.body.getReader();
      let first: Uint8Array;
      try {
        const r = await reader.read();
        first = r.done ? new Uint8Array() : r.value;
      } catch (e) {
        reader.cancel().catch(() => {});
        return failure(e, "stream broke before its first byte");
      }
      this.#record(worker, outcome);
      series.ttft.observe((d.clock.now() - start) / 1000);
      const body = relaySse(first, reader, worker.url, (how, err) => {
        if (how !== "error" || timedOut()) return;
        this.#record(worker, "failure");
        d.log.warn("worker stream broke; client got an error event", {
          request_id: ctx.requestId,
          worker: worker.url,
          err,
        });
      });
      holds.add(release);
      return {
        response: new Response(body, {
          status,
          headers: clientHeaders(res.headers, ctx.requestId, worker.id, true),
        }),
      };
    }

    this.#record(worker, outcome);
    holds.add(release);
    return {
      response: new Response(res.body, {
        status,
        headers: clientHeaders(res.headers, ctx.requestId, worker.id, false),
      }),
    };
  }
}

function timeoutError(ms: number): GatewayError {
  return new GatewayError(504, "request_timeout", `request did not finish within ${ms / 1000}s`);
}

function finalResponse(f: Failure, requestId: string): Response {
  if (f.worker) {
    const h = new Headers(f.worker.headers);
    h.delete("content-length");
    h.delete("content-encoding");
    h.delete("transfer-encoding");
    h.set("x-request-id", requestId);
    return new Response(f.worker.body, { status: f.worker.status, headers: h });
  }
  return errorResponse(f.error!, requestId);
}
