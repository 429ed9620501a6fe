/**
 * Relays a worker's SSE body to the client as it arrives, with backpressure (one read from the
 * worker per chunk the client takes; a read returns everything queued, so events that arrived
 * together leave in one write), as a `ChunkSource` the server reads. The first chunk was already
 * read by the caller (so a worker that dies before its first byte can still be retried
 * elsewhere). If the worker's stream breaks, goes silent past its idle deadline, or ends without
 * its `data: [DONE]` (cut short, not complete), the client gets an SSE `error` event and a clean
 * end instead of a cut connection; if the client leaves, the worker's body is cancelled, which
 * closes that connection so the engine aborts the request. `bodyStream` turns any `ChunkSource`
 * into a `ReadableStream`, for servers that need a `Response`.
 */

import type { ChunkSource } from "../../core/http.ts";
import { UpstreamError } from "../../upstream/types.ts";

export type { ChunkSource };

/** How a relayed stream ended. */
export type RelayEnd = "done" | "error" | "cancelled";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A stream's last event: `data: [DONE]`, then its blank line (or nothing after it). */
const TERMINATOR = /data: ?\[DONE\]\s*$/;

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}

/** The SSE event sent when the worker's stream breaks mid-way. */
export function sseErrorEvent(message: string, code: string, needsBoundary: boolean): Uint8Array {
  const payload = JSON.stringify({
    error: { message, type: "Bad Gateway", code, param: null },
  });
  return encoder.encode(`${needsBoundary ? "\n\n" : ""}event: error\ndata: ${payload}\n\n`);
}

/** Whether `chunk` ends an SSE event: a blank line (`\n\n`, `\r\r` or `\r\n\r\n`). */
function endsWithBlankLine(chunk: Uint8Array): boolean {
  const n = chunk.byteLength;
  const at = (i: number) => chunk[n - i];
  if (n >= 4 && at(4) === 13 && at(3) === 10 && at(2) === 13 && at(1) === 10) return true;
  return n >= 2 && at(1) === at(2) && (at(1) === 10 || at(1) === 13);
}

/**
 * The client-facing body of a stream: `first`, then the rest of `source`, one read of the worker
 * per read of the client. `onEnd` runs once, with the error when the worker's stream broke.
 */
export class SseRelay implements ChunkSource {
  #pending: Uint8Array | null;
  #last: Uint8Array;
  #prev: Uint8Array | null = null;
  #ended = false;
  readonly #source: ChunkSource;
  readonly #workerUrl: string;
  readonly #onEnd: (how: RelayEnd, err?: unknown) => void;
  readonly #observe: ((chunk: Uint8Array) => void) | undefined;

  /** `observe`, if given, sees each chunk read from the worker (the first one at once). */
  constructor(
    first: Uint8Array,
    source: ChunkSource,
    workerUrl: string,
    onEnd: (how: RelayEnd, err?: unknown) => void,
    observe?: (chunk: Uint8Array) => void,
  ) {
    this.#pending = first;
    this.#last = first;
    this.#source = source;
    this.#workerUrl = workerUrl;
    this.#onEnd = onEnd;
    this.#observe = observe;
    observe?.(first);
  }

  #end(how: RelayEnd, err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#onEnd(how, err);
  }

  /**
   * Whether the worker's last event was `data: [DONE]`: it is in the last two chunks read (its 14
   * bytes split across three would need a chunk shorter than they are in between).
   */
  #terminated(): boolean {
    const tail = this.#prev === null ? this.#last : concat(this.#prev, this.#last);
    return TERMINATOR.test(decoder.decode(tail.subarray(Math.max(0, tail.byteLength - 64))));
  }

  /** The last two chunks read from the worker (where a stream's usage is). */
  tail(): Uint8Array[] {
    return this.#prev === null ? [this.#last] : [this.#prev, this.#last];
  }

  /** Whether the worker's body has ended (the next read returns null). */
  get done(): boolean {
    return this.#pending === null && (this.#ended || this.#source.done === true);
  }

  /** The next bytes for the client; null at the end (an error event ends a broken stream). */
  async read(): Promise<Uint8Array | null> {
    const p = this.#pending;
    if (p) {
      this.#pending = null;
      return p;
    }
    if (this.#ended) return null;
    try {
      const chunk = await this.#source.read();
      if (chunk === null) {
        if (!this.#terminated()) {
          // Ended, but not as an OpenAI or sglang stream ends: cut short, not complete.
          const msg = `worker ${this.#workerUrl} ended its stream without data: [DONE]`;
          this.#end("error", new Error("stream ended without data: [DONE]"));
          return sseErrorEvent(msg, "upstream_stream_truncated", !endsWithBlankLine(this.#last));
        }
        this.#end("done");
      } else {
        this.#prev = this.#last;
        this.#last = chunk;
        this.#observe?.(chunk);
      }
      return chunk;
    } catch (err) {
      if (this.#ended) return null;
      const msg = `worker ${this.#workerUrl} stream broke: ${
        (err as Error)?.message ?? String(err)
      }`;
      this.#end("error", err);
      // A missed idle deadline: the worker went silent mid-stream (`--stream-idle-timeout-secs`).
      const code = err instanceof UpstreamError && err.kind === "timeout"
        ? "upstream_stream_stalled"
        : "upstream_stream_error";
      return sseErrorEvent(msg, code, !endsWithBlankLine(this.#last));
    }
  }

  /** The client left: the worker's body is cancelled (its connection closes). */
  cancel(): void {
    this.#end("cancelled");
    this.#source.cancel();
  }
}

/** A client-facing stream of `source` as it is read; a break errors the stream. */
export function bodyStream(source: ChunkSource): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const chunk = await source.read();
      if (chunk === null) ctrl.close();
      else ctrl.enqueue(chunk);
    },
    cancel() {
      source.cancel();
    },
  }, { highWaterMark: 0 });
}
