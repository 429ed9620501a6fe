/**
 * One attempt on one worker, shared by the regular and the PD paths: count it in flight (and
 * its sticky key), send the body, turn transport errors into retryable failures (or a 504 once
 * the deadline passed), keep a retryable worker status to pass through if it is the last, and
 * turn a good response head into the client response — a stream's first chunk is read first,
 * so a worker that dies before it can still be retried elsewhere. Breaker outcomes and
 * per-worker metrics are recorded here.
 */

import { errorResponse, GatewayError } from "../core/errors.ts";
import type { RouteRequest } from "../core/types.ts";
import { classifyStatus, type Outcome } from "../workers/circuit_breaker.ts";
import type { Worker } from "../workers/worker.ts";
import { clientHeaders, upstreamHeaders } from "./headers.ts";
import type { Holds, ProxyMetrics, RouteSeries } from "./proxy_metrics.ts";
import type { ProxyDeps, RequestContext } from "./proxy.ts";
import { relaySse } from "./relay.ts";
import { isRetryableStatus } from "./retry.ts";

/** Status answered when the client left (nobody reads it). */
export const CLIENT_CLOSED = 499;

/** Worker paths per endpoint. */
export const ENDPOINT_PATHS: Record<RouteRequest["endpoint"], string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  generate: "/generate",
  embeddings: "/v1/embeddings",
  rerank: "/v1/rerank",
};

/** A failed attempt, kept in case it is the last. */
export interface Failure {
  /** Whether another worker may be tried. */
  retryable: boolean;
  /** The worker's own error response, passed through verbatim if it is the last. */
  worker?: { status: number; headers: Headers; body: ArrayBuffer };
  /** Or the gateway's error. */
  error?: GatewayError;
}

/** What an attempt came to. */
export type Attempt = { response: Response } | { failure: Failure };

/** Everything about the request an attempt needs. */
export interface CallContext {
  /** The client request. */
  req: Request;
  /** Its routing inputs. */
  rr: RouteRequest;
  /** Request id and completion. */
  ctx: RequestContext;
  /** Released when the response is done. */
  holds: Holds;
  /** Clock reading at arrival. */
  start: number;
  /** Metric series of the request. */
  series: RouteSeries;
  /** Cancels worker requests (client gone or deadline). */
  signal: AbortSignal;
  /** Whether the deadline fired. */
  timedOut: () => boolean;
}

/** A worker response head, with the in-flight count it holds. */
export interface Sent {
  /** The worker's response. */
  res: Response;
  /** Gives the worker's in-flight slot back (idempotent). */
  release: () => void;
}

/** The request did not finish within the deadline. */
export function timeoutError(ms: number): GatewayError {
  return new GatewayError(504, "request_timeout", `request did not finish within ${ms / 1000}s`);
}

/** The client response for the last failure. */
export function finalResponse(f: Failure, requestId: string): Response {
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

/** Sends attempts and shapes their outcome. */
export class Calls {
  readonly #d: ProxyDeps;
  readonly #pm: ProxyMetrics;
  readonly #timeoutMs: number;

  /** Over the proxy's dependencies and metric series. */
  constructor(d: ProxyDeps, pm: ProxyMetrics, timeoutMs: number) {
    this.#d = d;
    this.#pm = pm;
    this.#timeoutMs = timeoutMs;
  }

  /** Records one outcome on the worker's breaker and metrics. */
  record(worker: Worker, outcome: Outcome): void {
    worker.breaker.record(outcome, this.#d.clock.now());
    const s = this.#pm.worker(worker);
    s.outcome[outcome].inc();
    s.cbFailures.set(worker.breaker.consecutiveFailures);
  }

  /** Sends `body` to `worker`: its response head, or what the failure came to. */
  async send(
    c: CallContext,
    worker: Worker,
    body: Uint8Array<ArrayBuffer>,
  ): Promise<Sent | Attempt> {
    const ws = this.#pm.worker(worker);
    worker.inFlight++;
    worker.requestsTotal++;
    ws.active.set(worker.inFlight);
    const releaseKey = c.rr.stickyKey === null ? null : worker.holdKey(c.rr.stickyKey);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      worker.inFlight--;
      releaseKey?.();
      ws.active.set(worker.inFlight);
    };
    try {
      const res = await this.#d.fetch(worker.url + ENDPOINT_PATHS[c.rr.endpoint], {
        method: "POST",
        headers: upstreamHeaders(c.req.headers, c.ctx.requestId, worker.apiKey),
        body,
        signal: c.signal,
      });
      this.#pm.upstream(res.status);
      return { res, release };
    } catch (e) {
      release();
      return this.failure(c, worker, e, "unreachable");
    }
  }

  /** A transport failure on `worker`: 499 if the client left, 504 past the deadline, else retryable 502. */
  failure(c: CallContext, worker: Worker, e: unknown, what: string): Attempt {
    if (c.req.signal.aborted) return { response: new Response(null, { status: CLIENT_CLOSED }) };
    const d = this.#d;
    this.record(worker, "failure");
    const late = c.timedOut();
    d.metrics.workerErrors.with(worker.type, "http", late ? "timeout" : "transport").inc();
    d.metrics.upstreamResponses.with("http", late ? "504" : "502", "call_upstream_failed").inc();
    if (late) return { failure: { retryable: false, error: timeoutError(this.#timeoutMs) } };
    const msg = `worker ${worker.url} ${what}: ${(e as Error)?.message ?? String(e)}`;
    return {
      failure: { retryable: true, error: new GatewayError(502, "call_upstream_failed", msg) },
    };
  }

  /** A retryable worker status: recorded, body kept for pass-through, slot released. */
  async retryableStatus(worker: Worker, sent: Sent): Promise<Attempt> {
    const { res, release } = sent;
    let body = new ArrayBuffer(0);
    try {
      body = await res.arrayBuffer();
    } catch { /* the status is what matters */ }
    release();
    this.record(worker, classifyStatus(res.status));
    if (res.status >= 500) this.#d.metrics.workerErrors.with(worker.type, "http", "status").inc();
    return {
      failure: { retryable: true, worker: { status: res.status, headers: res.headers, body } },
    };
  }

  /** Turns a worker response head into the client response (or a retryable failure). */
  async respond(c: CallContext, worker: Worker, sent: Sent): Promise<Attempt> {
    const d = this.#d;
    const { res, release } = sent;
    const status = res.status;
    if (isRetryableStatus(status)) return await this.retryableStatus(worker, sent);
    const outcome = classifyStatus(status);
    if (c.rr.stream && status < 300 && res.body) {
      const reader = res.body.getReader();
      let first: Uint8Array;
      try {
        const r = await reader.read();
        first = r.done ? new Uint8Array() : r.value;
      } catch (e) {
        reader.cancel().catch(() => {});
        release();
        return this.failure(c, worker, e, "stream broke before its first byte");
      }
      this.record(worker, outcome);
      c.series.ttft.observe((d.clock.now() - c.start) / 1000);
      const body = relaySse(first, reader, worker.url, (how, err) => {
        if (how !== "error" || c.timedOut()) return;
        this.record(worker, "failure");
        d.log.warn("worker stream broke; client got an error event", {
          request_id: c.ctx.requestId,
          worker: worker.url,
          err,
        });
      });
      c.holds.add(release);
      return {
        response: new Response(body, {
          status,
          headers: clientHeaders(res.headers, c.ctx.requestId, worker.id, true),
        }),
      };
    }
    this.record(worker, outcome);
    c.holds.add(release);
    return {
      response: new Response(res.body, {
        status,
        headers: clientHeaders(res.headers, c.ctx.requestId, worker.id, false),
      }),
    };
  }
}
