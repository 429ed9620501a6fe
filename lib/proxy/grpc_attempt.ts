/**
 * One attempt on a gRPC worker (sglang's scheduler service), inside the same attempt loop,
 * breaker, metrics and deadlines as HTTP workers: the request prepared once (`grpc_request.ts`:
 * chat template, token ids, sampling), `Generate` called, and its first message awaited before
 * anything reaches the client, so a worker that fails before it is retried elsewhere. A status
 * is mapped to its HTTP equivalent and judged as an HTTP worker's would be (`UNAVAILABLE` and a
 * stream that ends without an answer count as transport failures).
 *
 * Not streamed: the whole generation is read (a failure mid-way is still retryable: the client
 * has seen nothing), decoded, stop strings applied, and answered as JSON. Streamed: the SSE body
 * of `grpc_sse.ts`. A client that leaves cancels the call and sends `Abort`. PD pairs: `runPd`.
 */

import { GatewayError } from "../core/errors.ts";
import type { GenerateStream } from "../grpc/sglang_client.ts";
import type {
  DisaggregatedParamsPb,
  GenerateRequestPb,
  GenerateResponsePb,
} from "../grpc/sglang_proto.ts";
import { StopMatcher } from "../tokenizer/detokenize.ts";
import type { Decoder } from "../tokenizer/detokenize.ts";
import type { Cancel } from "../upstream/types.ts";
import { classifyStatus } from "../workers/circuit_breaker.ts";
import type { Worker } from "../workers/worker.ts";
import { type Calls, clientClosed } from "./attempt.ts";
import { type GrpcInput, grpcInput, type PromptTokenizer } from "./grpc_request.ts";
import { completeJson, type Shape, type Usage } from "./grpc_response.ts";
import { GrpcSse } from "./grpc_sse.ts";
import { isRetryableStatus } from "./retry.ts";
import type { AttemptResult, CallContext, ProxyDeps, Slot } from "./types.ts";

/** A gRPC worker's client, as an attempt uses it. */
export interface GenerateClient {
  generate(req: GenerateRequestPb, cancel?: Cancel): GenerateStream;
  abort(requestId: string, reason: string): Promise<unknown>;
}

/** What gRPC attempts are built from. */
export interface GrpcBackend {
  /** The client of a worker URL. */
  client(url: string): GenerateClient;
  /** The gateway's tokenizer (cached encode, template, decode). */
  tokenizer: PromptTokenizer & Decoder;
}

/** gRPC status codes the mapping needs (`@grpc/grpc-js`'s `status`). */
const S = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
};

/** The HTTP status a worker's gRPC status stands for. */
function httpStatusOf(code: number): number {
  switch (code) {
    case S.INVALID_ARGUMENT:
    case S.OUT_OF_RANGE:
    case S.FAILED_PRECONDITION:
      return 400;
    case S.NOT_FOUND:
      return 404;
    case S.RESOURCE_EXHAUSTED:
      return 429;
    case S.UNIMPLEMENTED:
      return 501;
    case S.DEADLINE_EXCEEDED:
      return 504;
    case S.UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

const JSON_TYPE = "application/json";
/** sglang's `--disaggregation-bootstrap-port` default. */
const DEFAULT_BOOTSTRAP_PORT = 8998;
const encoder = new TextEncoder();
let attemptSeq = 0;

/** A `Generate` call under way. */
class Started {
  readonly stream: GenerateStream;
  /** Frees the worker's in-flight slot (idempotent). */
  readonly release: () => void;
  /** The first message arrived (idempotent). */
  readonly started: () => void;
  /** The gateway cancelled it (the worker is not to blame for how it ends). */
  stopped = false;

  constructor(stream: GenerateStream, slot: Slot) {
    this.stream = stream;
    this.release = slot.release;
    this.started = slot.started;
  }

  /** Cancels the call and frees the slot. */
  stop(): void {
    this.stopped = true;
    this.stream.cancel();
    this.release();
  }
}

/** The `Generate` request of one attempt. */
function request(
  input: GrpcInput,
  rid: string,
  disaggregated?: DisaggregatedParamsPb,
): GenerateRequestPb {
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
    disaggregated_params: disaggregated,
  };
}

/** Runs attempts on gRPC workers. */
export class GrpcCalls {
  readonly #d: ProxyDeps;
  readonly #calls: Calls;
  readonly #g: GrpcBackend;
  readonly #inputs = new WeakMap<CallContext, GrpcInput>();

  constructor(d: ProxyDeps, calls: Calls, backend: GrpcBackend) {
    this.#d = d;
    this.#calls = calls;
    this.#g = backend;
  }

  /** The request prepared for gRPC workers (once per request; 400 on bad input). */
  #input(c: CallContext): GrpcInput {
    let input = c.grpc ?? this.#inputs.get(c);
    if (!input) {
      const body = c.body as Record<string, unknown>;
      input = grpcInput(c.rr.endpoint, body, this.#g.tokenizer, c.rr.model ?? "default");
      this.#inputs.set(c, input);
    }
    return input;
  }

  /** One attempt on `worker`. */
  async run(c: CallContext, worker: Worker): Promise<AttemptResult> {
    const input = this.#input(c);
    const rid = `${c.ctx.requestId}-${++attemptSeq}`;
    const call = this.#start(c, worker, request(input, rid));
    const first = await this.#first(c, worker, call);
    if (first.kind !== "first") return first;
    return await this.#answer(c, worker, input, rid, call, first.message);
  }

  /**
   * One PD attempt: the same request, with the prefill's bootstrap address and a fresh room in
   * `DisaggregatedParams`, to both legs at once (sglang's decode worker fetches the prompt's KV
   * from the prefill one). The client gets the decode leg's answer; the prefill's stream is read
   * to its end in the background. A leg that fails before its first message fails the attempt
   * (the other leg's call is cancelled) and the attempt loop picks another pair.
   */
  async runPd(c: CallContext, prefill: Worker, decode: Worker): Promise<AttemptResult> {
    const input = this.#input(c);
    const rid = `${c.ctx.requestId}-${++attemptSeq}`;
    const req = request(input, rid, {
      bootstrap_host: new URL(prefill.url).hostname.replace(/^\[|\]$/g, ""),
      // sglang's default bootstrap port when the prefill worker was given none (as upstream).
      bootstrap_port: prefill.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
      // `bootstrap_room` is an int32 on the wire.
      bootstrap_room: Math.floor(this.#d.random() * 0x7fffffff),
    });
    const p = this.#start(c, prefill, req);
    const d = this.#start(c, decode, req);
    const pf = this.#first(c, prefill, p);
    const df = this.#first(c, decode, d);
    // Whichever leg fails first fails the attempt; the other leg's call is cancelled.
    let other = d;
    const early = await Promise.race([
      pf,
      df.then((r) => r.kind === "first" ? pf : (other = p, r)),
    ]);
    if (early.kind !== "first") {
      other.stop();
      return early;
    }
    this.#drain(c, prefill, p);
    const answer = await df;
    if (answer.kind !== "first") {
      p.stop(); // not the prefill's fault: not blamed

      return answer;
    }
    return await this.#answer(c, decode, input, rid, d, answer.message);
  }

  /** Calls `Generate` on `worker`, counted in flight until `release`. */
  #start(c: CallContext, worker: Worker, req: GenerateRequestPb): Started {
    const slot = this.#calls.hold(c, worker);
    try {
      return new Started(this.#g.client(worker.url).generate(req, c.cancel), slot);
    } catch (e) {
      const failed = Promise.reject(e);
      failed.catch(() => {});
      return new Started({ next: () => failed, cancel: () => {} }, slot);
    }
  }

  /** The call's first message, or the attempt's failure (the call then released). */
  async #first(
    c: CallContext,
    worker: Worker,
    call: Started,
  ): Promise<{ kind: "first"; message: GenerateResponsePb } | AttemptResult> {
    try {
      const message = await call.stream.next();
      if (message === null) throw new Error("the worker ended the call without an answer");
      call.started();
      return { kind: "first", message };
    } catch (e) {
      call.release();
      // Stopped because the other PD leg failed: that leg's failure is the attempt's.
      if (call.stopped) return { kind: "response", reply: clientClosed() };
      return this.#failure(c, worker, e);
    }
  }

  /**
   * Reads a prefill leg's stream to its end without holding up the client, keeping its slot
   * until then (`Started.stop` cancels it without blaming the worker). Bounded: by the
   * request's cancellation while the client's answer is under way, and by the request timeout
   * from now on (a prefill that never ends is cut then); never rejects.
   */
  #drain(c: CallContext, worker: Worker, call: Started): void {
    const timer = setTimeout(() => call.stop(), this.#d.config.requestTimeoutSecs * 1000);
    (async () => {
      try {
        while ((await call.stream.next()) !== null) { /* discard */ }
        this.#calls.record(worker, "success");
      } catch {
        if (!call.stopped && !c.inb.gone.aborted && !c.timedOut()) {
          this.#calls.record(worker, "failure");
        }
      } finally {
        clearTimeout(timer);
        call.release();
      }
    })();
  }

  /** The client's answer from a call whose first message arrived. */
  async #answer(
    c: CallContext,
    worker: Worker,
    input: GrpcInput,
    rid: string,
    call: Started,
    first: GenerateResponsePb,
  ): Promise<AttemptResult> {
    const { stream, release } = call;
    const client = this.#g.client(worker.url);
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
    if (!input.stream) {
      return await this.#whole(c, worker, input, stream, first, shape, headers, release);
    }
    const outcome = classifyStatus(200);
    const clock = this.#d.clock;
    const firstAt = clock.now();
    const onDone = (u: Usage) => {
      this.#checkPrediction(c, worker, u);
      c.series.tokens[0].inc(u.prompt);
      c.series.tokens[1].inc(u.completion);
      if (u.completion > 1) {
        c.series.tpot.observe((clock.now() - firstAt) / 1000 / (u.completion - 1));
      }
    };
    const body = new GrpcSse(
      this.#g.tokenizer,
      input,
      shape,
      stream,
      first,
      onDone,
      (err) => {
        // A client that left, or the deadline, cancelled the call: not the worker's fault.
        if (c.timedOut() || c.inb.gone.aborted) return;
        this.#calls.record(worker, "failure");
        this.#d.log.warn("worker stream broke; client got an error event", {
          request_id: c.ctx.requestId,
          worker: worker.url,
          err,
        });
      },
      () => void client.abort(rid, "client gone").catch(() => {}),
    );
    headers.push(["content-type", "text/event-stream"], ["cache-control", "no-cache"]);
    c.holds.add(release);
    this.#calls.record(worker, outcome);
    c.series.ttft.observe((this.#d.clock.now() - c.start) / 1000);
    return { kind: "response", reply: { status: 200, headers, body } };
  }

  /** Reads a non-streamed generation to its end and answers it as JSON. */
  async #whole(
    c: CallContext,
    worker: Worker,
    input: GrpcInput,
    stream: GenerateStream,
    first: GenerateResponsePb,
    shape: Shape,
    headers: [string, string][],
    release: () => void,
  ): Promise<AttemptResult> {
    const ids: number[] = [];
    let m: GenerateResponsePb | null = first;
    try {
      while (m && m.response !== "complete") {
        if (m.chunk) { for (const id of m.chunk.token_ids) ids.push(id); }
        m = await stream.next();
      }
      if (!m?.complete) throw new Error("the worker ended the call without completing");
    } catch (e) {
      // Not after a complete: sglang reads a cancelled call as a client that left.
      stream.cancel();
      release();
      return this.#failure(c, worker, e);
    }
    release();
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
    this.#calls.record(worker, classifyStatus(200));
    this.#checkPrediction(c, worker, usage);
    c.series.tokens[0].inc(usage.prompt);
    c.series.tokens[1].inc(usage.completion);
    headers.push(["content-type", JSON_TYPE]);
    const json = completeJson(shape, text, out, finish, matched, usage);
    return {
      kind: "response",
      reply: { status: 200, headers, body: encoder.encode(JSON.stringify(json)) },
    };
  }

  /** Compares the pick's predicted cached tokens with the worker's usage. */
  #checkPrediction(c: CallContext, worker: Worker, u: Usage): void {
    this.#calls.predictions.check(c.notes.get(worker.id), c.rr, u);
  }

  /** What a failed call comes to: the HTTP path's judgement of the equivalent status. */
  #failure(c: CallContext, worker: Worker, e: unknown): AttemptResult {
    const code = (e as { code?: number })?.code;
    if (code === undefined || code === S.UNAVAILABLE || code === S.CANCELLED || c.cancel.aborted) {
      return this.#calls.failure(c, worker, e, "unreachable", "grpc");
    }
    const status = httpStatusOf(code);
    this.#d.metrics.upstreamResponses.with("grpc", String(status), "").inc();
    this.#calls.record(worker, classifyStatus(status));
    if (status >= 500) this.#d.metrics.workerErrors.with(worker.type, "grpc", "status").inc();
    const msg = `worker ${worker.url} answered ${(e as Error).message}`;
    const type = status < 500 ? "invalid_request_error" : undefined;
    const error = new GatewayError(status, status < 500 ? "invalid_request" : "worker_error", msg, {
      type,
    });
    return { kind: "failure", worker, failure: { retryable: isRetryableStatus(status), error } };
  }
}
