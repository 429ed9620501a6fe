/**
 * Speaking HTTP to a worker: the request's body (with the PD bootstrap fields on a pair's legs)
 * sent to the endpoint's path, the response head judged — a head over `MAX_RELAYED_HEAD_BYTES`
 * fails the attempt (retried: relayed, it would break the client), a retryable status (5xx, 408,
 * 429) fails it with the worker's answer kept for pass-through if it is the last, another error
 * status is passed through to the client, a 2xx is ready — and the client's reply: a stream must
 * be an uncompressed event stream (else the attempt fails and is retried), its first bytes are
 * read before anything reaches the client (a worker that dies before them can still be retried),
 * then relayed through `SseRelay` (which ends a stream cut short with an error event); a 2xx
 * whole answer is read to its end first (`whole.ts`, up to a cap), so a worker that breaks or
 * stalls mid-body can be retried too; an error status is relayed as it comes. Transport errors
 * are retryable failures (or a 504 past the deadline). The worker's slot is held until the
 * client's response is done, or until a drained leg's end.
 */

import { ENDPOINT_PATHS } from "../../core/types.ts";
import type { ReplyBody } from "../../core/http.ts";
import {
  readAll,
  type UpstreamBody,
  UpstreamError,
  type UpstreamResponse,
} from "../../upstream/types.ts";
import type { Cancel } from "../../core/cancel.ts";
import { classifyStatus, isRetryableStatus } from "../../workers/failures.ts";
import type { Worker } from "../../workers/worker.ts";
import { usageIn } from "../cache_prediction.ts";
import { clientClosed, type Slot, type WorkerLedger } from "../ledger.ts";
import type {
  Attempt,
  AttemptResult,
  Bootstrap,
  CallContext,
  Leg,
  Protocol,
  ProxyDeps,
  Ready,
} from "../types.ts";
import { clientHeaders, headOverBound, notAnEventStream, upstreamHeaders } from "./headers.ts";
import { elsewhere, progressDeadlines } from "../progress.ts";
import { blockedBy } from "./continuation.ts";
import { StreamContinuer } from "./continuer.ts";
import { SseRelay } from "./relay.ts";
import { countEvents, MeteredBody, reportedUsage } from "./usage.ts";
import { readWhole, WHOLE_ANSWER_MAX_BYTES } from "./whole.ts";

const EMPTY = new Uint8Array(0);
const READY: Ready = { kind: "ready" };
const encoder = new TextEncoder();

/** The body with the bootstrap fields of a PD pair (arrays for a batched request). */
function withBootstrap(
  body: Record<string, unknown>,
  b: Bootstrap,
): Uint8Array<ArrayBuffer> {
  const fields = b.batched
    ? {
      bootstrap_host: b.rooms.map(() => b.host),
      bootstrap_port: b.rooms.map(() => b.port),
      bootstrap_room: b.rooms,
    }
    : { bootstrap_host: b.host, bootstrap_port: b.port, bootstrap_room: b.rooms[0] };
  return encoder.encode(JSON.stringify({ ...body, ...fields }));
}

/** HTTP workers (`Protocol`). */
export class HttpProtocol implements Protocol {
  readonly #d: ProxyDeps;
  readonly #ledger: WorkerLedger;
  /** Each PD attempt's body with its bootstrap fields, encoded once for the pair's two legs. */
  readonly #pdBodies = new WeakMap<Attempt, Uint8Array<ArrayBuffer>>();

  constructor(d: ProxyDeps, ledger: WorkerLedger) {
    this.#d = d;
    this.#ledger = ledger;
  }

  open(c: CallContext, worker: Worker, attempt: Attempt, cancel: Cancel, slot: Slot): Leg {
    return new HttpLeg(this.#d, this.#ledger, c, worker, this.#body(c, attempt), cancel, slot);
  }

  /** The bytes to send: the client's, or once per PD attempt, with its bootstrap fields. */
  #body(c: CallContext, attempt: Attempt): Uint8Array<ArrayBuffer> {
    const boot = attempt.bootstrap;
    if (!boot) return c.bytes;
    let body = this.#pdBodies.get(attempt);
    if (!body) {
      body = withBootstrap(c.body as Record<string, unknown>, boot);
      this.#pdBodies.set(attempt, body);
    }
    return body;
  }
}

/** One HTTP request to one worker (`Leg`). */
class HttpLeg implements Leg {
  readonly worker: Worker;
  readonly #d: ProxyDeps;
  readonly #ledger: WorkerLedger;
  readonly #c: CallContext;
  readonly #cancel: Cancel;
  readonly #slot: Slot;
  readonly #body: Uint8Array<ArrayBuffer>;
  #res: UpstreamResponse | null = null;
  #stopped = false;
  /** Whether the stream's first piece has come (its wait is then an idle one). */
  #firstPiece = false;

  constructor(
    d: ProxyDeps,
    ledger: WorkerLedger,
    c: CallContext,
    worker: Worker,
    body: Uint8Array<ArrayBuffer>,
    cancel: Cancel,
    slot: Slot,
  ) {
    this.#d = d;
    this.#ledger = ledger;
    this.#c = c;
    this.worker = worker;
    this.#cancel = cancel;
    this.#slot = slot;
    this.#body = body;
  }

  /** Sends the request (called once, right after `open`) and judges the response head. */
  async ready(): Promise<Ready | AttemptResult> {
    const c = this.#c;
    const d = this.#d;
    let res: UpstreamResponse;
    try {
      res = this.#res = await d.upstream.send({
        base: this.worker.url,
        path: ENDPOINT_PATHS[c.rr.endpoint],
        method: "POST",
        headers: upstreamHeaders(
          c.inb.headers,
          c.ctx.requestId,
          this.worker.apiKey,
          this.#slot.trace,
        ),
        body: this.#body,
        cancel: this.#cancel,
        ...progressDeadlines(
          d.clock,
          this.worker,
          c.rr.stream,
          c.body,
          d.config.streamHeadTimeoutSecs,
          d.config.streamIdleTimeoutSecs,
          () => this.#firstPiece,
          elsewhere(d.registry, d.clock, this.worker, c.rr.model),
        ),
      });
    } catch (e) {
      this.#slot.release();
      if (this.#stopped) return clientClosed();
      this.#missed(e);
      return this.#ledger.failure(c, this.worker, e, "unreachable", "http");
    }
    this.#ledger.saw(this.worker);
    this.#ledger.upstreamStatus(c, this.worker, res.status);
    // A whole answer's head comes with its last token; a stream's first bytes are its first.
    if (!c.rr.stream) this.#slot.firstToken();
    if (this.#stopped) {
      this.#drop();
      return clientClosed();
    }
    const status = res.status;
    const oversized = headOverBound(res.headers);
    if (oversized !== null) {
      // Relayed, it would break the client (Node's 16 KiB, HAProxy's and nginx's buffers); the
      // next worker may answer sanely. Nothing has reached the client yet.
      this.#drop();
      const e = new Error(oversized);
      return this.#ledger.failure(c, this.worker, e, "answered what cannot be relayed", "http");
    }
    if (isRetryableStatus(status)) return await this.#retryable(res);
    if (status < 200 || status > 599) {
      // A status no client response may carry (1xx: the client skips interim answers, so
      // only a stray 101 gets here): the worker is freed, the attempt fails retryably.
      this.#drop();
      const e = new Error(`status ${status}`);
      return this.#ledger.failure(
        this.#c,
        this.worker,
        e,
        "answered what cannot be relayed",
        "http",
      );
    }
    return status < 300 ? READY : this.#whole(res);
  }

  async answer(): Promise<AttemptResult> {
    const res = this.#res!;
    if (!this.#c.rr.stream) return res.body.whole ? this.#whole(res) : await this.#wholeAnswer(res);
    const c = this.#c;
    const worker = this.worker;
    // A stream is relayed event by event: a body that is not one cannot be (a whole JSON answer,
    // or bytes compressed against no asked-for encoding). Nothing has reached the client yet.
    const wrong = notAnEventStream(res.headers);
    if (wrong !== null) {
      this.#drop();
      return this.#ledger.failure(c, worker, new Error(wrong), "answered a stream wrongly", "http");
    }
    let first: Uint8Array;
    const ledger = this.#ledger;
    const d = this.#d;
    try {
      first = (await res.body.read()) ?? EMPTY;
      this.#firstPiece = true;
      ledger.saw(worker);
      this.#slot.firstToken();
    } catch (e) {
      this.#drop();
      if (this.#stopped) return clientClosed();
      this.#missed(e);
      return ledger.failure(c, worker, e, "stream broke before its first byte", "http");
    }
    const wantsUsage = ledger.wantsUsage(c, worker);
    const meter = c.meter;
    let events = 0;
    meter?.live(() => ({ prompt: 0, completion: events }));
    const progress = (chunk: Uint8Array) => {
      ledger.saw(worker);
      if (meter) events += countEvents(chunk);
    };
    const continuer = this.#continuer();
    const now = () => d.clock.now();
    const body: SseRelay = new SseRelay(first, res.body, worker.url, (how, err) => {
      if (how === "done" && wantsUsage) ledger.reported(c, worker, usageIn(body.tail()));
      if (how === "done" && meter) {
        const u = reportedUsage(body.tail(), false);
        if (u) meter.final(u.prompt, u.completion);
      }
      if (how !== "error" || c.timedOut() || c.inb.gone.aborted) return;
      ledger.broke(worker, err);
      this.#missed(err);
      // Its slot goes now: a continuation holds another worker's until the response is done.
      this.#slot.release();
      if (continuer || c.continuing) return; // the continuer tells what became of the stream
      // Not continued: continuation off (or PD, a mixed fleet), else the request's kind.
      const off = c.resume === null || d.config.streamMigrationLimit <= 0;
      d.metrics.continuations.with(worker.url, off ? "off" : "blocked").inc();
      d.log.warn("worker stream broke; client got an error event", {
        request_id: c.ctx.requestId,
        worker: worker.url,
        err,
      });
    }, {
      observe: progress,
      waiting: (on) => worker.progress.wait(on, now),
      continuer,
      errorEvents: !c.continuing,
    });
    ledger.streaming(c, worker, res.status);
    return this.#reply(res, body, true);
  }

  /** Counts a missed progress deadline (`err` a timeout) by what the worker held back. */
  #missed(err: unknown): void {
    if (!(err instanceof UpstreamError) || err.kind !== "timeout") return;
    const phase = this.#res === null ? "head" : this.#firstPiece ? "idle" : "first_piece";
    this.#d.metrics.progressMisses.with(this.worker.url, phase).inc();
  }

  /**
   * The continuer of this stream, or undefined where a break ends it with an error event: a
   * request that cannot be continued (`blockedBy`), continuation off, PD or gRPC (no `resume`).
   */
  #continuer(): StreamContinuer | undefined {
    const c = this.#c;
    const d = this.#d;
    const limit = d.config.streamMigrationLimit;
    if (c.resume === null || limit <= 0 || blockedBy(c.rr.endpoint, c.body) !== null) return;
    const first = this.worker;
    return new StreamContinuer({
      endpoint: c.rr.endpoint,
      body: c.body as Record<string, unknown>,
      worker: first.id,
      limit,
      resume: c.resume,
      outcome: (result, s, why) => {
        d.metrics.continuations.with(first.url, result).inc();
        const line = {
          request_id: c.ctx.requestId,
          worker: first.url,
          result,
          pieces_sent: s?.pieces,
          why,
        };
        if (result === "continued" || result === "completed") {
          d.log.info("worker stream broke; continued elsewhere", line);
        } else d.log.warn("worker stream broke; client got an error event", line);
      },
    });
  }

  drain(): Promise<void> {
    const body = this.#res!.body;
    const stop = () => this.stop();
    return this.#ledger.drain(
      this.#c,
      this.worker,
      this.#slot,
      () => body.read(),
      stop,
      () => this.#stopped,
    );
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#cancel.cancel(new Error("leg stopped"));
    this.#drop();
  }

  /** Abandons the response (if any) and frees the slot. */
  #drop(): void {
    this.#res?.body.cancel();
    this.#slot.release();
  }

  /** A retryable status: recorded, its body kept for pass-through, the slot released. */
  async #retryable(res: UpstreamResponse): Promise<AttemptResult> {
    let body: Uint8Array<ArrayBuffer> = EMPTY;
    try {
      body = await readAll(res.body);
    } catch { /* the status is what matters */ }
    this.#slot.release();
    const status = res.status;
    return this.#ledger.failedStatus(this.worker, status, "http", {
      retryable: true,
      worker: { status, headers: res.headers, body },
    });
  }

  /** A 2xx whole answer, read to its end (up to the cap) before the client sees any of it. */
  async #wholeAnswer(res: UpstreamResponse): Promise<AttemptResult> {
    let body: UpstreamBody;
    try {
      body = await readWhole(res.body, WHOLE_ANSWER_MAX_BYTES);
      this.#ledger.saw(this.worker);
    } catch (e) {
      this.#drop();
      if (this.#stopped) return clientClosed();
      return this.#ledger.failure(this.#c, this.worker, e, "answer broke before its end", "http");
    }
    const read = this.#res = { status: res.status, headers: res.headers, body };
    return this.#whole(read);
  }

  /** A whole answer, or an error status passed through, relayed as it comes. */
  #whole(res: UpstreamResponse): AttemptResult {
    const status = res.status;
    const bodiless = status === 204 || status === 205 || status === 304;
    if (bodiless && !res.body.whole) res.body.cancel();
    let body: ReplyBody = bodiless ? null : res.body.whole ?? res.body;
    const meter = status < 300 ? this.#c.meter : null;
    if (meter && res.body.whole) {
      const u = reportedUsage([res.body.whole], true);
      if (u) meter.final(u.prompt, u.completion);
    } else if (meter && body !== null) body = new MeteredBody(res.body, meter);
    const ledger = this.#ledger;
    if (status < 300 && res.body.whole && ledger.wantsUsage(this.#c, this.worker)) {
      ledger.reported(this.#c, this.worker, usageIn([res.body.whole]));
    }
    ledger.record(this.worker, classifyStatus(status));
    return this.#reply(res, body, false);
  }

  /** The client's reply, holding the worker's slot until it is delivered. */
  #reply(res: UpstreamResponse, body: ReplyBody, stream: boolean): AttemptResult {
    const c = this.#c;
    c.hold(this.#slot.release);
    const headers = clientHeaders(res.headers, c.ctx.requestId, this.worker.id, stream);
    return { kind: "response", reply: { status: res.status, headers, body } };
  }
}
