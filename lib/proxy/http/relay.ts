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

/** Goes on with a stream whose worker broke (`continuation.ts`). */
export interface Continuer {
  /** Keeps a chunk the client was sent (whole events). */
  sent(chunk: Uint8Array): void;
  /**
   * After a break (`err`): a source to read on from (its events already the client's stream's),
   * the bytes that end the stream (nothing was left to generate), or null: not continued.
   */
  next(err: unknown): Promise<ChunkSource | Uint8Array | null>;
}

/** What a relay does beyond passing bytes on. */
export interface RelayOptions {
  /** Sees each chunk read from the first worker (the first one at once). */
  observe?: (chunk: Uint8Array) => void;
  /** Told when a read of the first worker starts (true) and ends (false). */
  waiting?: (on: boolean) => void;
  /** Goes on elsewhere when the worker's stream breaks; the client is then sent whole events. */
  continuer?: Continuer;
  /**
   * Whether a break is told to the client as an SSE error event (default true); false: the
   * read rejects instead, for a relay read by another relay that continues the stream.
   */
  errorEvents?: boolean;
}

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

/** Where the last blank line of `chunk` ends (0 when there is none). */
function lastEventEnd(chunk: Uint8Array): number {
  for (let i = chunk.byteLength - 1; i > 0; i--) {
    const b = chunk[i];
    if ((b === 10 || b === 13) && chunk[i - 1] === b) return i + 1;
    if (b === 10 && i >= 3 && chunk[i - 1] === 13 && chunk[i - 2] === 10 && chunk[i - 3] === 13) {
      return i + 1;
    }
  }
  return 0;
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
 * per read of the client. With a continuer, only whole events reach the client, and a break goes
 * on from another worker's source when the continuer finds one.
 */
export class SseRelay implements ChunkSource {
  #pending: Uint8Array | null;
  #last: Uint8Array;
  #prev: Uint8Array | null = null;
  /** `onEnd` has run. */
  #ended = false;
  /** Nothing is left to read: after `#pending`, the end. */
  #finished = false;
  #source: ChunkSource;
  readonly #workerUrl: string;
  readonly #onEnd: (how: RelayEnd, err?: unknown) => void;
  #observe: ((chunk: Uint8Array) => void) | undefined;
  #waiting: ((on: boolean) => void) | undefined;
  readonly #continuer: Continuer | undefined;
  readonly #errorEvents: boolean;
  /** The start of an event not yet whole, held back (with a continuer). */
  #held: Uint8Array | null = null;

  /**
   * Relays `first`, then `source`; `onEnd` runs once: when the first worker's stream ends, breaks
   * (continued or not) or the client leaves.
   */
  constructor(
    first: Uint8Array,
    source: ChunkSource,
    workerUrl: string,
    onEnd: (how: RelayEnd, err?: unknown) => void,
    o: RelayOptions = {},
  ) {
    this.#last = first;
    this.#source = source;
    this.#workerUrl = workerUrl;
    this.#onEnd = onEnd;
    this.#observe = o.observe;
    this.#waiting = o.waiting;
    this.#continuer = o.continuer;
    this.#errorEvents = o.errorEvents ?? true;
    o.observe?.(first);
    this.#pending = this.#whole(first);
  }

  #end(how: RelayEnd, err?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#onEnd(how, err);
  }

  /** With a continuer, the whole events of `chunk` (after what was held), holding the rest. */
  #whole(chunk: Uint8Array): Uint8Array {
    const c = this.#continuer;
    if (!c) return chunk;
    const all = this.#held === null ? chunk : concat(this.#held, chunk);
    const end = endsWithBlankLine(all) ? all.byteLength : lastEventEnd(all);
    this.#held = end === all.byteLength ? null : all.subarray(end);
    const out = end === all.byteLength ? all : all.subarray(0, end);
    if (end > 0) c.sent(out);
    return out;
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
    return this.#pending === null &&
      (this.#finished || (!this.#continuer && this.#source.done === true));
  }

  /** The next bytes for the client; null at the end (an error event ends a broken stream). */
  async read(): Promise<Uint8Array | null> {
    for (;;) {
      const p = this.#pending;
      if (p !== null) {
        this.#pending = null;
        if (p.byteLength > 0) return p;
      }
      if (this.#finished) return null;
      let broke: unknown;
      const waiting = this.#waiting;
      waiting?.(true);
      try {
        const chunk = await this.#source.read();
        waiting?.(false);
        if (chunk !== null) {
          this.#prev = this.#last;
          this.#last = chunk;
          this.#observe?.(chunk);
          this.#pending = this.#whole(chunk);
          continue;
        }
        if (this.#terminated()) {
          this.#end("done");
          this.#finished = true;
          this.#pending = this.#held; // a last event without its blank line
          continue;
        }
        // Ended, but not as an OpenAI or sglang stream ends: cut short, not complete.
        broke = new TruncatedStream(this.#workerUrl);
      } catch (err) {
        waiting?.(false);
        if (this.#finished) return null; // the client left
        broke = err;
      }
      const next = await this.#goOn(broke);
      if (next === null) return this.#broken(broke);
      if (next instanceof Uint8Array) {
        this.#pending = next;
        this.#finished = true;
      } else this.#source = next;
    }
  }

  /** Asks the continuer to go on after `err`: a source, the stream's last bytes, or null. */
  #goOn(err: unknown): Promise<ChunkSource | Uint8Array | null> {
    const c = this.#continuer;
    if (!c) return Promise.resolve(null);
    this.#end("error", err); // the first worker's part is over, continued or not
    this.#held = null; // the start of an event its worker never finished: never sent
    this.#observe = undefined; // a continuing worker's own relay observes its chunks
    this.#waiting = undefined;
    this.#prev = null;
    return c.next(err);
  }

  /** The end of a broken stream: an error event, or a rejection for a relay read by a relay. */
  #broken(err: unknown): Uint8Array {
    this.#end("error", err);
    this.#finished = true;
    if (!this.#errorEvents) throw err;
    const code = err instanceof TruncatedStream
      ? "upstream_stream_truncated"
      // A missed idle deadline: the worker went silent mid-stream (`--stream-idle-timeout-secs`).
      : err instanceof UpstreamError && err.kind === "timeout"
      ? "upstream_stream_stalled"
      : "upstream_stream_error";
    const msg = err instanceof TruncatedStream
      ? err.message
      : `worker ${this.#workerUrl} stream broke: ${(err as Error)?.message ?? String(err)}`;
    return sseErrorEvent(msg, code, !endsWithBlankLine(this.#last));
  }

  /** The client left: the worker's body is cancelled (its connection closes). */
  cancel(): void {
    this.#end("cancelled");
    this.#finished = true;
    this.#source.cancel();
  }
}

/** A worker's stream that ended without its `data: [DONE]`: cut short, not complete. */
export class TruncatedStream extends Error {
  constructor(workerUrl: string) {
    super(`worker ${workerUrl} ended its stream without data: [DONE]`);
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
