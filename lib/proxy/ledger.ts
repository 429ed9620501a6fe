/**
 * What every protocol records about an attempt on a worker, in one place: the in-flight slot
 * (and sticky key, and the prefill backlog until the first token), breaker outcomes with their
 * per-worker metrics, transport failures (499 when the client left, 504 past the deadline,
 * else a retryable 502, or 504 when the worker timed out), the first token's TTFT, and the usage
 * the worker reported (the cache prediction against it, characters per token learned from it).
 */

import { errorReply, GatewayError } from "../core/errors.ts";
import type { Reply } from "../core/http.ts";
import type { ConnectionMode } from "../core/types.ts";
import type { Clock } from "../core/clock.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { Outcome } from "../workers/circuit_breaker.ts";
import { classifyStatus } from "../workers/failures.ts";
import { UpstreamError } from "../upstream/types.ts";
import type { TextRatios } from "../workers/text_ratios.ts";
import type { Worker } from "../workers/worker.ts";
import { CachePredictions, type ReportedUsage } from "./cache_prediction.ts";
import { passThroughHeaders } from "./http/headers.ts";
import type { ProxyMetrics } from "./series.ts";
import type { AttemptResult, CallContext, Failed, Failure, Slot } from "./types.ts";

export type { Slot } from "./types.ts";
import { CLIENT_CLOSED } from "./types.ts";
import { legSpan, openLeg, usageOnSpans } from "./trace.ts";

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
export function clientClosedReply(): Reply {
  return { status: CLIENT_CLOSED, headers: [], body: null };
}

/** An attempt that ends because the client left (or the leg was stopped: nobody reads it). */
export function clientClosed(): AttemptResult {
  return { kind: "response", reply: clientClosedReply() };
}

/** Records attempts on workers; shared by every protocol. */
export class WorkerLedger {
  readonly #m: Metrics;
  readonly #pm: ProxyMetrics;
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  readonly #predictions: CachePredictions;
  readonly #ratios: TextRatios | null;
  readonly #stallMs: number;

  /**
   * Over the proxy's metric series, clock and request timeout; `ratios` learns characters per
   * token from the answers (null: nothing learned); a worker that misses a progress deadline
   * gets no new requests for `stallMs` unless it shows progress first (0: it is not excluded).
   */
  constructor(
    pm: ProxyMetrics,
    clock: Clock,
    timeoutMs: number,
    ratios: TextRatios | null,
    stallMs = 0,
  ) {
    this.#m = pm.m;
    this.#pm = pm;
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
    this.#predictions = new CachePredictions(pm.m);
    this.#ratios = ratios;
    this.#stallMs = stallMs;
  }

  /**
   * An attempt on `worker` failed with `e` after its start: a breaker failure, and when it was
   * a missed progress deadline (the worker went silent), the worker's exclusion until progress.
   */
  broke(worker: Worker, e: unknown): void {
    this.record(worker, "failure");
    if (this.#stallMs > 0 && e instanceof UpstreamError && e.kind === "timeout") {
      worker.progress.stall(this.#clock.now(), this.#stallMs);
    }
  }

  /** Something arrived from `worker` (a head, a piece, an answer's end): it is progressing. */
  saw(worker: Worker): void {
    worker.progress.saw(this.#clock.now());
  }

  /** Records one outcome on the worker's breaker and metrics. */
  record(worker: Worker, outcome: Outcome): void {
    worker.breaker.record(outcome, this.#clock.now());
    const s = this.#pm.worker(worker);
    s.outcome[outcome].inc();
    s.cbFailures.set(worker.breaker.consecutiveFailures);
  }

  /**
   * Counts a request in flight on `worker` (and its sticky key), and its selection note's
   * prefill tokens in the worker's backlog until `firstToken` or `release`; both idempotent.
   */
  hold(c: CallContext, worker: Worker): Slot {
    const ws = this.#pm.worker(worker);
    worker.ownInFlight++;
    worker.requestsTotal++;
    ws.active.set(worker.ownInFlight);
    const releaseKey = c.rr.stickyKey === null ? null : worker.holdKey(c.rr.stickyKey);
    const charged = worker.chargePrefill(
      c.notes.get(worker.id)?.prefillTokens ?? 0,
      this.#clock.now(),
    );
    const trace = c.ctx.trace ? openLeg(c, c.ctx.trace, worker) : null;
    const span = trace?.span ?? null;
    let first = span !== null && c.rr.stream;
    const firstToken = first
      ? () => {
        if (first) span!.event("first_token");
        first = false;
        charged();
      }
      : charged;
    let held = true;
    return {
      firstToken,
      trace,
      release: () => {
        if (!held) return;
        held = false;
        worker.ownInFlight--;
        charged();
        releaseKey?.();
        ws.active.set(worker.ownInFlight);
        span?.finish();
      },
    };
  }

  /**
   * A transport failure on `worker` (no usable answer): 499 if the client left, a final 504
   * past the deadline, else a retryable 502 naming `what` happened (504 when the worker was
   * given up on for silence, its head or body timed out, as nginx and HAProxy answer).
   */
  failure(
    c: CallContext,
    worker: Worker,
    e: unknown,
    what: string,
    connection: ConnectionMode,
  ): AttemptResult {
    if (c.inb.gone.aborted) return clientClosed();
    this.broke(worker, e);
    const late = c.timedOut();
    const silent = late || (e instanceof UpstreamError && e.kind === "timeout");
    const status = silent ? 504 : 502;
    this.#m.workerErrors.with(worker.type, connection, silent ? "timeout" : "transport").inc();
    this.#m.upstreamResponses.with(connection, String(status), "call_upstream_failed").inc();
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
      failure: { retryable: true, error: new GatewayError(status, "call_upstream_failed", msg) },
    };
  }

  /** Counts `worker`'s HTTP response by status (and on the attempt's span). */
  upstreamStatus(c: CallContext, worker: Worker, status: number): void {
    this.#pm.upstream(status);
    legSpan(c, worker)?.set("http.response.status_code", status);
  }

  /** A worker's error status that will not be answered to the client: recorded, failed. */
  failedStatus(
    worker: Worker,
    status: number,
    connection: ConnectionMode,
    failure: Failure,
  ): Failed {
    this.record(worker, classifyStatus(status));
    if (status >= 500) this.#m.workerErrors.with(worker.type, connection, "status").inc();
    return { kind: "failure", worker, failure };
  }

  /** The client's stream starts: the worker's outcome and the request's TTFT (not again). */
  streaming(c: CallContext, worker: Worker, status: number): void {
    this.record(worker, classifyStatus(status));
    if (!c.continuing) c.series.ttft.observe((this.#clock.now() - c.start) / 1000);
  }

  /**
   * The usage `worker` reported for `c`: a request routed on text teaches the characters per
   * token of its model and worker (`TextRatios`); a cached count is added to the worker's and
   * checked against the pick's prediction (nothing to check without one).
   */
  reported(c: CallContext, worker: Worker, reported: ReportedUsage | null): void {
    if (reported === null) return;
    if (c.spans !== null) usageOnSpans(c, legSpan(c, worker), reported);
    if (this.#ratios !== null && c.rr.tokens === null) {
      this.#ratios.observe(c.rr.model ?? "unknown", worker, c.rr.text.length, reported.prompt);
    }
    if (reported.cached === null) return;
    worker.reportedPromptTokens += reported.prompt;
    worker.reportedCachedTokens += reported.cached;
    this.#predictions.check(c.notes.get(worker.id), c.rr, reported);
  }

  /**
   * Reads a ready leg to its end (`next` answers null), discarding it, then frees its slot: the
   * worker is credited if it ends, blamed if it breaks, unless the gateway stopped the leg
   * (`stopped`), the client left or the deadline passed. From now on the request timeout bounds
   * it (`stop` cuts it then). Never rejects.
   */
  async drain(
    c: CallContext,
    worker: Worker,
    slot: Slot,
    next: () => Promise<unknown>,
    stop: () => void,
    stopped: () => boolean,
  ): Promise<void> {
    const cut = this.#clock.after(this.#timeoutMs, stop);
    try {
      while ((await next()) !== null) { /* discard */ }
      if (!stopped()) this.record(worker, "success");
    } catch {
      if (!stopped() && !c.inb.gone.aborted && !c.timedOut()) this.record(worker, "failure");
    } finally {
      cut();
      slot.release();
    }
  }

  /**
   * Whether the answer's usage is worth reading: the pick on `worker` predicted cached tokens, or
   * the request was routed on text (its prompt tokens teach the characters per token).
   */
  wantsUsage(c: CallContext, worker: Worker): boolean {
    if (c.spans !== null) return true; // the trace records it
    if (this.#ratios !== null && c.rr.tokens === null && c.rr.text.length > 0) return true;
    const note = c.notes.get(worker.id);
    return note !== undefined && note.predictedCached !== null;
  }
}
