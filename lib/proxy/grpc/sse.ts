/**
 * The SSE body of a streamed gRPC generation (`leg.ts` opens the call and awaits its
 * first message): decodes ids as they arrive (`IncrementalDecoder`: characters split across tokens
 * are held back), finds stop strings across chunks (`StopMatcher`; the worker's request is then
 * cancelled), holds back a chunk's last id while it may be the stop token, and ends with the
 * finish reason, usage when asked and `[DONE]`; a worker that breaks mid-stream ends it with an
 * SSE `error` event. A client that leaves cancels the call (`onCancel` sends `Abort`).
 */

import type { ChunkSource } from "../../core/http.ts";
import type { GenerateStream } from "../../grpc/sglang_client.ts";
import type { GenerateResponsePb } from "../../grpc/sglang_proto.ts";
import { type Decoder, IncrementalDecoder, StopMatcher } from "../../tokenizer/detokenize.ts";
import type { GrpcInput } from "./request.ts";
import { type Shape, SseShaper, type Usage } from "./response.ts";
import { sseErrorEvent } from "../http/relay.ts";
import { UpstreamError } from "../../upstream/types.ts";

/** What a stream tells its leg: each message after the first, and its end (any end). */
export interface SseHooks {
  progress?: () => void;
  end?: () => void;
  /**
   * After a break, the call that goes on from the ids generated so far (`GrpcSse.adopt` of a
   * continuation's stream), or null: the stream ends with an error event.
   */
  resume?: (generated: readonly number[]) => Promise<Adopted | null>;
}

/** A continuation's call, taken over by the stream it continues (`GrpcSse.adopt`). */
export interface Adopted {
  stream: GenerateStream;
  first: GenerateResponsePb;
  hooks: SseHooks;
  onBreak: (err: unknown) => void;
  onCancel: () => void;
}

/** The SSE body of one streamed generation. */
export class GrpcSse implements ChunkSource {
  readonly #in: GrpcInput;
  #stream: GenerateStream;
  readonly #dec: IncrementalDecoder;
  readonly #stop: StopMatcher;
  readonly #shape: SseShaper;
  /** A chunk's last id when it may be the stop token, kept until what follows shows it is not. */
  #held: number | null = null;
  readonly #onDone: (u: Usage, continued: boolean) => void;
  #onBreak: (err: unknown) => void;
  #onCancel: () => void;
  #hooks: SseHooks;
  /** Every id the workers generated so far (a continuation's prompt is the prompt plus these). */
  readonly #generated: number[] = [];
  /** Ids generated before the current call (0 until a continuation). */
  #base = 0;
  #pending: GenerateResponsePb | null;
  #ended = false;
  #usage: Usage;

  constructor(
    tok: Decoder,
    input: GrpcInput,
    shape: Shape,
    stream: GenerateStream,
    first: GenerateResponsePb,
    onDone: (u: Usage, continued: boolean) => void,
    onBreak: (err: unknown) => void,
    onCancel: () => void,
    hooks: SseHooks = {},
  ) {
    this.#hooks = hooks;
    this.#in = input;
    this.#stream = stream;
    this.#dec = new IncrementalDecoder(tok, input.skipSpecial);
    this.#stop = new StopMatcher(input.stops, input.noStopTrim);
    this.#shape = new SseShaper(shape);
    this.#pending = first;
    this.#onDone = onDone;
    this.#onBreak = onBreak;
    this.#onCancel = onCancel;
    this.#usage = { prompt: input.ids.length, completion: 0, cached: 0 };
  }

  async read(): Promise<Uint8Array | null> {
    while (!this.#ended) {
      let m: GenerateResponsePb | null;
      try {
        m = this.#pending ?? await this.#stream.next();
      } catch (err) {
        if (this.#ended) return null; // cancelled (the client left): nothing more to send
        if (await this.#goOn(err)) continue;
        return this.#broken(err);
      }
      if (this.#pending === null && m !== null) this.#hooks.progress?.();
      this.#pending = null;
      if (m === null) {
        const err = new Error("the worker ended the stream without completing");
        if (await this.#goOn(err)) continue;
        return this.#broken(err);
      }
      if (m.chunk) {
        const ch = m.chunk;
        for (const id of ch.token_ids) this.#generated.push(id);
        this.#usage = {
          prompt: this.#prompt(ch.prompt_tokens),
          completion: this.#base + ch.completion_tokens,
          cached: ch.cached_tokens,
        };
        const ids = this.#release(ch.token_ids);
        const step = this.#stop.push(this.#dec.push(ids));
        if (step.stopped !== null) {
          this.#stream.cancel();
          return this.#finish(step.text, ids, "stop", step.stopped);
        }
        const frame = this.#shape.delta(step.text, ids, this.#usage);
        if (frame) return frame;
        continue;
      }
      if (m.complete) {
        const done = m.complete;
        this.#usage = {
          prompt: this.#prompt(done.prompt_tokens),
          completion: done.completion_tokens
            ? this.#base + done.completion_tokens
            : this.#usage.completion,
          cached: done.cached_tokens,
        };
        const late = done.output_ids.length > 0 && this.#dec.ids.length === 0 &&
            this.#held === null
          ? this.#release(done.output_ids)
          : [];
        // The held id was the stop token (the worker matched one, or the stream ended on it).
        const stopped = this.#held !== null &&
          (done.matched_token_id !== undefined || done.finish_reason === "stop");
        if (this.#held !== null && !stopped) late.push(this.#held);
        this.#held = null;
        const step = this.#stop.push(this.#dec.push(late) + this.#dec.flush());
        const tail = step.stopped === null ? step.text + this.#stop.flush() : step.text;
        const matched = step.stopped ?? done.matched_stop_str ?? done.matched_token_id ?? null;
        return this.#finish(
          tail,
          late,
          step.stopped ? "stop" : done.finish_reason || "stop",
          matched,
        );
      }
    }
    return null;
  }

  /** The prompt's tokens, as a worker counts them: the original prompt's once continued. */
  #prompt(reported: number): number {
    return this.#base > 0 ? this.#in.ids.length : reported || this.#usage.prompt;
  }

  /**
   * After a break: goes on from another worker's call when the leg finds one (`hooks.resume`),
   * the decoder, stop matcher and shape carrying on as they were; true when it does. Not while
   * a possible stop token is held (the break may have come right after the end).
   */
  async #goOn(err: unknown): Promise<boolean> {
    const resume = this.#hooks.resume;
    if (!resume || this.#held !== null) return false;
    this.#hooks.end?.();
    this.#onBreak(err);
    this.#onBreak = () => {}; // blamed once, whatever follows
    const next = await resume(this.#generated).catch(() => null);
    if (next === null || this.#ended) {
      next?.stream.cancel();
      return false;
    }
    this.#stream = next.stream;
    this.#pending = next.first;
    this.#hooks = { ...next.hooks, resume };
    this.#onBreak = next.onBreak;
    this.#onCancel = next.onCancel;
    this.#base = this.#generated.length;
    return true;
  }

  /**
   * Hands this (unread) stream's call to the stream it continues, which reads it from now on;
   * this one is over.
   */
  adopt(): Adopted {
    this.#ended = true;
    return {
      stream: this.#stream,
      first: this.#pending!,
      hooks: this.#hooks,
      onBreak: this.#onBreak,
      onCancel: this.#onCancel,
    };
  }

  /** The ids of a chunk to decode now: the held one first, the last held if it may be a stop. */
  #release(ids: readonly number[]): number[] {
    const out = this.#held === null ? [...ids] : [this.#held, ...ids];
    this.#held = null;
    if (!this.#in.noStopTrim && out.length > 0 && this.#in.stopIds.has(out[out.length - 1])) {
      this.#held = out.pop()!;
    }
    return out;
  }

  #finish(
    text: string,
    ids: readonly number[],
    finish: string,
    matched: string | number | null,
  ): Uint8Array {
    this.#ended = true;
    this.#hooks.end?.();
    this.#onDone(this.#usage, this.#base > 0);
    const delta = this.#shape.delta(text, ids, this.#usage);
    const end = this.#shape.end(finish, matched, this.#usage, this.#in.includeUsage);
    if (!delta) return end;
    const out = new Uint8Array(delta.length + end.length);
    out.set(delta);
    out.set(end, delta.length);
    return out;
  }

  #broken(err: unknown): Uint8Array {
    this.#ended = true;
    this.#hooks.end?.();
    this.#onBreak(err);
    const msg = `worker stream broke: ${(err as Error)?.message ?? String(err)}`;
    // A missed idle deadline: the worker went silent mid-stream (`--stream-idle-timeout-secs`).
    const stalled = err instanceof UpstreamError && err.kind === "timeout";
    return sseErrorEvent(msg, stalled ? "upstream_stream_stalled" : "upstream_stream_error", false);
  }

  get done(): boolean {
    return this.#ended;
  }

  /** The prompt's tokens and the tokens generated so far (the worker's running counts). */
  get usage(): Usage {
    return this.#usage;
  }

  cancel(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#hooks.end?.();
    this.#stream.cancel();
    this.#onCancel();
  }
}
