/**
 * Speaking gRPC to a worker (sglang's scheduler service), in the same attempt loop, breaker,
 * metrics and deadlines as HTTP workers: the request prepared once per request (`request.ts`:
 * chat template, token ids, sampling), `Generate` called (a PD leg's with the pair's bootstrap
 * in `DisaggregatedParams`), and its first message awaited before anything reaches the client,
 * so a worker that fails before it is retried elsewhere. A status is mapped to its HTTP
 * equivalent and judged as an HTTP worker's would be (`UNAVAILABLE` and a stream that ends
 * without an answer count as transport failures).
 *
 * Not streamed: the whole generation is read (a failure mid-way is still retryable: the client
 * has seen nothing), decoded, stop strings applied, and answered as JSON. Streamed: the SSE body
 * of `sse.ts`. A client that leaves cancels the call and sends `Abort`.
 */

import { GatewayError } from "../../core/errors.ts";
import type { GenerateStream } from "../../grpc/sglang_client.ts";
import type {
  DisaggregatedParamsPb,
  GenerateRequestPb,
  GenerateResponsePb,
} from "../../grpc/sglang_proto.ts";
import { StopMatcher } from "../../tokenizer/detokenize.ts";
import type { Cancel } from "../../core/cancel.ts";
import { classifyStatus, isRetryableStatus } from "../../workers/failures.ts";
import type { Worker } from "../../workers/worker.ts";
import { clientClosed, type Slot, type WorkerLedger } from "../ledger.ts";
import type {
  Attempt,
  AttemptResult,
  Bootstrap,
  CallContext,
  GrpcBackend,
  Leg,
  Protocol,
  ProxyDeps,
  Ready,
} from "../types.ts";
import type { GrpcInput } from "./request.ts";
import { UpstreamError } from "../../upstream/types.ts";
import { ProgressWatch } from "../progress.ts";
import { CallProgress } from "./progress.ts";
import { completeJson, type Shape, type Usage } from "./response.ts";
import { GrpcSse } from "./sse.ts";
import { grpcResumer } from "./continue.ts";
import { httpStatusOf, isTransportStatus } from "./status.ts";
import { traceMetadata } from "../trace.ts";

const JSON_TYPE = "application/json";
/**
 * sglang's `--disaggregation-bootstrap-port` default: a prefill worker registered without a
 * bootstrap port is sent it (the proto's int32 cannot say "unset", unlike HTTP's null).
 */
const DEFAULT_BOOTSTRAP_PORT = 8998;
const READY: Ready = { kind: "ready" };
const encoder = new TextEncoder();

/**
 * The `DisaggregatedParams` of a PD pair. The room is an int32 on the wire: its low 31 bits. A
 * gRPC request is never an empty batch (its prompt was validated when it was prepared), so it
 * has a room.
 */
function disaggregated(b: Bootstrap): DisaggregatedParamsPb {
  return {
    bootstrap_host: b.host,
    bootstrap_port: b.port ?? DEFAULT_BOOTSTRAP_PORT,
    bootstrap_room: b.rooms[0] % 2 ** 31,
  };
}

/** The `Generate` request of one attempt. */
function generateRequest(input: GrpcInput, rid: string, attempt: Attempt): GenerateRequestPb {
  return {
    request_id: rid,
    tokenized: { original_text: input.text, input_ids: input.ids },
    sampling_params: input.sampling,
    return_logprob: false,
    logprob_start_len: -1,
    top_logprobs_num: 0,
    lora_id: "",
    data_parallel_rank: 0,
    stream: input.stream,
    require_reasoning: false,
    disaggregated_params: attempt.bootstrap ? disaggregated(attempt.bootstrap) : undefined,
  };
}

/** gRPC workers (`Protocol`). */
export class GrpcProtocol implements Protocol {
  readonly #d: ProxyDeps;
  readonly #ledger: WorkerLedger;
  readonly #g: GrpcBackend;
  /** The calls' progress deadlines (null: none set). */
  readonly #watch: ProgressWatch | null;

  constructor(d: ProxyDeps, ledger: WorkerLedger, backend: GrpcBackend) {
    this.#d = d;
    this.#ledger = ledger;
    this.#g = backend;
    const { streamIdleTimeoutSecs: idle, streamHeadTimeoutSecs: head } = d.config;
    const shortest = (idle || head) * 1000;
    this.#watch = shortest > 0
      ? new ProgressWatch(d.clock, Math.max(10, Math.min(1000, shortest / 4)))
      : null;
  }

  prepare(c: CallContext): Promise<unknown> {
    return c.readyGrpc();
  }

  open(c: CallContext, worker: Worker, attempt: Attempt, cancel: Cancel, slot: Slot): Leg {
    const input = c.grpcInput();
    const rid = `${c.ctx.requestId}-${attempt.seq}`;
    const req = generateRequest(input, rid, attempt);
    const leg = new GrpcLeg(
      this.#d,
      this.#ledger,
      this.#g,
      c,
      worker,
      input,
      rid,
      req,
      cancel,
      slot,
    );
    if (this.#watch) leg.watch(this.#watch);
    return leg;
  }
}

/** A call whose `Generate` could not even start: it fails on the first read. */
function failedStream(e: unknown): GenerateStream {
  const failed = Promise.reject(e);
  failed.catch(() => {});
  return { next: () => failed, cancel: () => {} };
}

/** One `Generate` call on one worker (`Leg`). */
class GrpcLeg implements Leg {
  readonly worker: Worker;
  readonly #d: ProxyDeps;
  readonly #ledger: WorkerLedger;
  readonly #g: GrpcBackend;
  readonly #c: CallContext;
  readonly #input: GrpcInput;
  readonly #rid: string;
  readonly #slot: Slot;
  readonly #stream: GenerateStream;
  #message: GenerateResponsePb | null = null;
  /** The gateway cancelled it (the worker is not to blame for how it ends). */
  #stopped = false;
  /** Its progress deadline. */
  readonly #progress: CallProgress;

  constructor(
    d: ProxyDeps,
    ledger: WorkerLedger,
    g: GrpcBackend,
    c: CallContext,
    worker: Worker,
    input: GrpcInput,
    rid: string,
    req: GenerateRequestPb,
    cancel: Cancel,
    slot: Slot,
  ) {
    this.#d = d;
    this.#ledger = ledger;
    this.#g = g;
    this.#c = c;
    this.worker = worker;
    this.#input = input;
    this.#rid = rid;
    this.#slot = slot;
    let stream: GenerateStream;
    try {
      stream = g.client(worker.url).generate(req, cancel, traceMetadata(slot.trace));
    } catch (e) {
      stream = failedStream(e);
    }
    this.#stream = stream;
    this.#progress = new CallProgress(d, ledger, worker, input.stream, c.body, stream, c.rr.model);
  }

  /** Watches the call's progress (`CallProgress`). */
  watch(watch: ProgressWatch): void {
    this.#progress.watch(watch);
  }

  /** The call's first message; on a failure the call is released. */
  async ready(): Promise<Ready | AttemptResult> {
    let message: GenerateResponsePb | null;
    try {
      message = await this.#stream.next();
      if (message === null) throw new Error("the worker ended the call without an answer");
    } catch (e) {
      this.#progress.end();
      this.#slot.release();
      if (this.#stopped) return clientClosed();
      return this.#failure(e);
    }
    this.#progress.first = true;
    this.#progress.saw();
    this.#slot.firstToken();
    if (this.#stopped) return clientClosed();
    this.#message = message;
    return READY;
  }

  async answer(): Promise<AttemptResult> {
    const c = this.#c;
    const input = this.#input;
    const worker = this.worker;
    this.#d.metrics.upstreamResponses.with("grpc", "200", "").inc();
    const shape: Shape = {
      endpoint: input.endpoint,
      id: c.ctx.requestId,
      model: input.model,
      created: Math.floor(Date.now() / 1000),
    };
    const headers: [string, string][] = [
      ["x-request-id", c.ctx.requestId],
      ["x-smg-routed-worker-id", worker.id],
    ];
    if (!input.stream) return await this.#whole(shape, headers);
    const clock = this.#d.clock;
    const firstAt = clock.now();
    const ledger = this.#ledger;
    const client = this.#g.client(worker.url);
    const onDone = (u: Usage, continued: boolean) => {
      c.meter?.final(u.prompt, u.completion);
      // Once continued, the usage is two workers': no check of this pick's cache prediction.
      if (!continued) ledger.reported(c, worker, u);
      c.series.tokens[0].inc(u.prompt);
      c.series.tokens[1].inc(u.completion);
      if (u.completion > 1) {
        c.series.tpot.observe((clock.now() - firstAt) / 1000 / (u.completion - 1));
      }
    };
    const onBreak = (err: unknown) => {
      // A client that left, or the deadline, cancelled the call: not the worker's fault.
      if (c.timedOut() || c.inb.gone.aborted) return;
      ledger.broke(worker, err);
      this.#progress.missed(err);
      this.#d.log.warn("worker stream broke; client got an error event", {
        request_id: c.ctx.requestId,
        worker: worker.url,
        err,
      });
    };
    const onCancel = () => void client.abort(this.#rid, "client gone").catch(() => {});
    const body = new GrpcSse(
      this.#g.tokenizer,
      input,
      shape,
      this.#stream,
      this.#message!,
      onDone,
      onBreak,
      onCancel,
      {
        progress: () => this.#progress.saw(),
        end: () => this.#progress.end(),
        resume: grpcResumer(this.#d, c, input, worker),
      },
    );
    c.meter?.live(() => body.usage);
    headers.push(["content-type", "text/event-stream"], ["cache-control", "no-cache"]);
    c.hold(this.#slot.release);
    ledger.streaming(c, worker, 200);
    return { kind: "response", reply: { status: 200, headers, body } };
  }

  drain(): Promise<void> {
    const stream = this.#stream;
    const stop = () => this.stop();
    const progress = this.#progress;
    const next = async () => {
      const m = await stream.next();
      if (m) progress.saw();
      return m;
    };
    return this.#ledger.drain(this.#c, this.worker, this.#slot, next, stop, () => this.#stopped)
      .finally(() => progress.end());
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#progress.end();
    this.#stream.cancel();
    this.#slot.release();
  }

  /** Reads a non-streamed generation to its end and answers it as JSON. */
  async #whole(shape: Shape, headers: [string, string][]): Promise<AttemptResult> {
    const c = this.#c;
    const input = this.#input;
    const stream = this.#stream;
    const ids: number[] = [];
    let m: GenerateResponsePb | null = this.#message;
    try {
      while (m && m.response !== "complete") {
        if (m.chunk) { for (const id of m.chunk.token_ids) ids.push(id); }
        m = await stream.next();
        if (m) this.#progress.saw();
      }
      if (!m?.complete) throw new Error("the worker ended the call without completing");
    } catch (e) {
      // Not after a complete: sglang reads a cancelled call as a client that left.
      stream.cancel();
      this.#progress.end();
      this.#slot.release();
      return this.#failure(e);
    }
    this.#progress.end();
    this.#slot.release();
    const done = m.complete!;
    const out = done.output_ids.length > 0 ? done.output_ids : ids;
    const trim = !input.noStopTrim && out.length > 0 &&
      (done.matched_token_id !== undefined || input.stopIds.has(out[out.length - 1]));
    let text = this.#g.tokenizer.decode(trim ? out.slice(0, -1) : out, input.skipSpecial);
    let finish = done.finish_reason || "stop";
    let matched: string | number | null = done.matched_stop_str ?? done.matched_token_id ?? null;
    const stop = new StopMatcher(input.stops, input.noStopTrim).push(text);
    if (stop.stopped !== null) {
      text = stop.text;
      finish = "stop";
      matched = stop.stopped;
    }
    const usage: Usage = {
      prompt: done.prompt_tokens || input.ids.length,
      completion: done.completion_tokens || out.length,
      cached: done.cached_tokens,
    };
    this.#ledger.record(this.worker, classifyStatus(200));
    c.meter?.final(usage.prompt, usage.completion);
    this.#ledger.reported(c, this.worker, usage);
    c.series.tokens[0].inc(usage.prompt);
    c.series.tokens[1].inc(usage.completion);
    headers.push(["content-type", JSON_TYPE]);
    const json = completeJson(shape, text, out, finish, matched, usage);
    return {
      kind: "response",
      reply: { status: 200, headers, body: encoder.encode(JSON.stringify(json)) },
    };
  }

  /** What a failed call comes to: the HTTP path's judgement of the equivalent status. */
  #failure(e: unknown): AttemptResult {
    const c = this.#c;
    const worker = this.worker;
    if (e instanceof UpstreamError) {
      this.#progress.missed(e);
      return this.#ledger.failure(c, worker, e, "went silent", "grpc");
    }
    const code = (e as { code?: number })?.code;
    if (isTransportStatus(code) || c.cancel.aborted) {
      return this.#ledger.failure(c, worker, e, "unreachable", "grpc");
    }
    const status = httpStatusOf(code!);
    this.#d.metrics.upstreamResponses.with("grpc", String(status), "").inc();
    const msg = `worker ${worker.url} answered ${(e as Error).message}`;
    const type = status < 500 ? "invalid_request_error" : undefined;
    const error = new GatewayError(status, status < 500 ? "invalid_request" : "worker_error", msg, {
      type,
    });
    return this.#ledger.failedStatus(worker, status, "grpc", {
      retryable: isRetryableStatus(status),
      error,
    });
  }
}
