/**
 * One attempt on one worker, shared by the regular and the PD paths: count it in flight (and
 * its sticky key), send the body, turn transport errors into retryable failures (or a 504 once
 * the deadline passed), keep a retryable worker status to pass through if it is the last, and
 * turn a good response head into the client response — a stream's first bytes are read first,
 * so a worker that dies before them can still be retried elsewhere. Breaker outcomes and
 * per-worker metrics are recorded here.
 */

import { errorReply, GatewayError } from "../core/errors.ts";
import type { Reply, ReplyBody } from "../core/http.ts";
import { readAll } from "../upstream/types.ts";
import { classifyStatus, type Outcome } from "../workers/circuit_breaker.ts";
import type { SelectionNote } from "../core/types.ts";
import type { Worker } from "../workers/worker.ts";
import { clientHeaders, passThroughHeaders, upstreamHeaders } from "./headers.ts";
import type { ProxyMetrics } from "./proxy_metrics.ts";
import { CachePredictions, usageIn } from "./cache_prediction.ts";
import { SseRelay } from "./relay.ts";
import { isRetryableStatus } from "./retry.ts";
import {
  type AttemptResult,
  type CallContext,
  CLIENT_CLOSED,
  ENDPOINT_PATHS,
  type Failed,
  type Failure,
  type ProxyDeps,
  type Sent,
  type Slot,
} from "./types.ts";

/** The request did not finish within the deadline. */
export function timeoutError(ms: number): GatewayError {
  return new GatewayError(504, "request_timeout", `request did not finish within ${ms / 1000}s`);
}

/** The client reply for the last failure. */
export function finalReply(f: Failure, requestId: string): Reply {
  if (f.worker) {
    return {
      status: f.worker.status,
      headers: passThroughHeaders(f.worker.headers, requestId),
      body: f.worker.body,
    };
  }
  return errorReply(f.error!, requestId);
}

/** What a client that left is answered (nobody reads it). */
export function clientClosed(): Reply {
  return { status: CLIENT_CLOSED, headers: [], body: null };
}

const EMPTY = new Uint8Array(0);

/** Sends attempts and shapes their outcome. */
export class Calls {
  readonly #d: ProxyDeps;
  readonly #pm: ProxyMetrics;
  readonly #timeoutMs: number;
  /** Routing predictions against what workers report. */
  readonly predictions: CachePredictions;

  /** Over the proxy's dependencies and metric series. */
  constructor(d: ProxyDeps, pm: ProxyMetrics, timeoutMs: number) {
    this.#d = d;
    this.#pm = pm;
    this.#timeoutMs = timeoutMs;
    this.predictions = new CachePredictions(d.metrics);
  }

  /** Records one outcome on the worker's breaker and metrics. */
  record(worker: Worker, outcome: Outcome): void {
    worker.breaker.record(outcome, this.#d.clock.now());
    const s = this.#pm.worker(worker);
    s.outcome[outcome].inc();
    s.cbFailures.set(worker.breaker.consecutiveFailures);
  }

  /**
   * Counts a request in flight on `worker` (and its sticky key), and its selection note's
   * prefill tokens in the worker's backlog until `started` (its first token) or `release`;
   * both are idempotent.
   */
  hold(c: CallContext, worker: Worker): Slot {
    const ws = this.#pm.worker(worker);
    worker.inFlight++;
    worker.requestsTotal++;
    ws.active.set(worker.inFlight);
    const releaseKey = c.rr.stickyKey === null ? null : worker.holdKey(c.rr.stickyKey);
    const started = worker.chargePrefill(c.notes.get(worker.id)?.prefillTokens ?? 0);
    let held = true;
    return {
      started,
      release: () => {
        if (!held) return;
        held = false;
        worker.inFlight--;
        started();
        releaseKey?.();
        ws.active.set(worker.inFlight);
      },
    };
  }

  /** Sends `body` to `worker`: its response head, or what the failure came to. */
  async send(
    c: CallContext,
    worker: Worker,
    body: Uint8Array<ArrayBuffer>,
  ): Promise<Sent | AttemptResult> {
    const { release, started } = this.hold(c, worker);
    try {
      const res = await this.#d.upstream.send({
        base: worker.url,
        path: ENDPOINT_PATHS[c.rr.endpoint],
        method: "POST",
        headers: upstreamHeaders(c.inb.headers, c.ctx.requestId, worker.apiKey),
        body,
        cancel: c.cancel,
      });
      this.#pm.upstream(res.status);
      // A whole answer's head comes with its last token; a stream's first bytes are its first.
      if (!c.rr.stream) started();
      return { kind: "sent", res, release, started };
    } catch (e) {
      release();
      return this.failure(c, worker, e, "unreachable");
    }
  }

  /** A transport failure on `worker`: 499 if the client left, 504 past the deadline, else retryable 502. */
  failure(
    c: CallContext,
    worker: Worker,
    e: unknown,
    what: string,
    connection: "http" | "grpc" = "http",
  ): AttemptResult {
    if (c.inb.gone.aborted) return { kind: "response", reply: clientClosed() };
    const d = this.#d;
    this.record(worker, "failure");
    const late = c.timedOut();
    d.metrics.workerErrors.with(worker.type, connection, late ? "timeout" : "transport").inc();
    d.metrics.upstreamResponses.with(connection, late ? "504" : "502", "call_upstream_failed")
      .inc();
    if (late) {
      return {
        kind: "failure",
        worker,
        failure: { retryable: false, error: timeoutError(this.#timeoutMs) },
      };
    }
    const msg = `worker ${worker.url} ${what}: ${(e as Error)?.message ?? String(e)}`;
    return {
      kind: "failure",
      worker,
      failure: { retryable: true, error: new GatewayError(502, "call_upstream_failed", msg) },
    };
  }

  /** A retryable worker status: recorded, body kept for pass-through, slot released. */
  async retryableStatus(worker: Worker, sent: Sent): Promise<Failed> {
    const { res, release } = sent;
    let body: Uint8Array<ArrayBuffer> = EMPTY;
    try {
      body = await readAll(res.body);
    } catch { /* the status is what matters */ }
    release();
    this.record(worker, classifyStatus(res.status));
    if (res.status >= 500) this.#d.metrics.workerErrors.with(worker.type, "http", "status").inc();
    return {
      kind: "failure",
      worker,
      failure: { retryable: true, worker: { status: res.status, headers: res.headers, body } },
    };
  }

  /** Turns a worker response head into the client response (or a retryable failure). */
  async respond(c: CallContext, worker: Worker, sent: Sent): Promise<AttemptResult> {
    const d = this.#d;
    const { res, release } = sent;
    const status = res.status;
    if (isRetryableStatus(status)) return await this.retryableStatus(worker, sent);
    const outcome = classifyStatus(status);
    if (c.rr.stream && status < 300) {
      let first: Uint8Array;
      try {
        first = (await res.body.read()) ?? EMPTY;
        sent.started();
      } catch (e) {
        res.body.cancel();
        release();
        return this.failure(c, worker, e, "stream broke before its first byte");
      }
      const note = c.notes.get(worker.id);
      const predicted = note !== undefined && note.predictedCached !== null;
      const body: SseRelay = new SseRelay(first, res.body, worker.url, (how, err) => {
        if (how === "done" && predicted) this.#checkPrediction(c, note, body.tail());
        if (how !== "error" || c.timedOut()) return;
        this.record(worker, "failure");
        d.log.warn("worker stream broke; client got an error event", {
          request_id: c.ctx.requestId,
          worker: worker.url,
          err,
        });
      });
      const headers = clientHeaders(res.headers, c.ctx.requestId, worker.id, true);
      const answer = this.#answer(c, worker, sent, body, headers);
      if (answer.kind === "response") {
        this.record(worker, outcome);
        c.series.ttft.observe((d.clock.now() - c.start) / 1000);
      }
      return answer;
    }
    const bodiless = status === 204 || status === 205 || status === 304;
    if (bodiless && !res.body.whole) res.body.cancel();
    const body = bodiless ? null : res.body.whole ?? res.body;
    if (status < 300 && res.body.whole) {
      this.#checkPrediction(c, c.notes.get(worker.id), [res.body.whole]);
    }
    const headers = clientHeaders(res.headers, c.ctx.requestId, worker.id, false);
    const answer = this.#answer(c, worker, sent, body, headers);
    if (answer.kind === "response") this.record(worker, outcome);
    return answer;
  }

  /**
   * Compares a pick's predicted cached tokens with the usage in the answer's last bytes (read
   * only when there is a prediction).
   */
  #checkPrediction(
    c: CallContext,
    note: SelectionNote | undefined,
    tail: readonly Uint8Array[],
  ): void {
    if (!note || note.predictedCached === null) return;
    const u = usageIn(tail);
    if (u !== null) this.predictions.check(note, c.rr, u);
  }

  /**
   * The client reply, holding the worker's slot until it is delivered. A status no client
   * response may carry (1xx: the client skips interim answers, so only a stray 101 gets here)
   * frees the worker and makes the attempt a retryable failure. Header names and values need no
   * check: the client's parser admits only tokens and values without CR, LF or NUL.
   */
  #answer(
    c: CallContext,
    worker: Worker,
    sent: Sent,
    body: ReplyBody,
    headers: [string, string][],
  ): AttemptResult {
    const status = sent.res.status;
    if (status < 200 || status > 599) {
      sent.res.body.cancel();
      sent.release();
      const e = new Error(`status ${status}`);
      return this.failure(c, worker, e, "answered what cannot be relayed");
    }
    c.holds.add(sent.release);
    return { kind: "response", reply: { status, headers, body } };
  }
}
