/**
 * The gateway's own view of an HTTP exchange with a client, independent of the server that
 * carries it: an `Inbound` request (headers, the body read once, a cancellation that fires when
 * the client leaves) and a `Reply` (status, header pairs, a body that is bytes, a chunk source or
 * a stream). Two servers produce them: the own HTTP/1.1 front (`lib/front/`), which writes a
 * `Reply` straight to the socket, and `Deno.serve`, through `RequestInbound` and `toResponse`
 * (`lib/server/inbound.ts`). No `Request`, `Response` or `Headers` is built on the inference path
 * unless the server in use needs one.
 */

/** Header lookup and iteration; names lower-case. A `Headers` satisfies it. */
export interface HeaderMap {
  /** The value of `name`, or null. */
  get(name: string): string | null;
  /** Every (name, value) pair. */
  [Symbol.iterator](): Iterator<[string, string]>;
}

/** A cancellation to follow: `Cancel` (`cancel.ts`) satisfies it. */
export interface Abortable {
  /** Whether it fired. */
  readonly aborted: boolean;
  /** Why. */
  readonly reason: unknown;
  /** Runs `fn` when it fires (at once if it has). */
  on(fn: () => void): void;
  /** Forgets `fn`. */
  off(fn: () => void): void;
}

/** A body read piece by piece: the next bytes or null at the end; `cancel` abandons it. */
export interface ChunkSource {
  /** The next bytes; null at the end; rejects when the body breaks off. */
  read(): Promise<Uint8Array | null>;
  /** Abandons the rest. */
  cancel(): void;
  /** True once the source knows the next read returns null (its end has arrived). */
  readonly done?: boolean;
}

/** A reply body: bytes (length known), a chunk source or a stream (length unknown), or none. */
export type ReplyBody = Uint8Array | ChunkSource | ReadableStream<Uint8Array> | null;

/** The gateway's answer to a client request. */
export interface Reply {
  /** HTTP status. */
  status: number;
  /** Header pairs; names lower-case; no framing headers (`content-length`, ...). */
  headers: [string, string][];
  /** The body. */
  body: ReplyBody;
}

/** A client request as the gateway reads it. */
export interface Inbound {
  /** Method. */
  readonly method: string;
  /** Absolute URL. */
  readonly url: string;
  /** Path without the query. */
  readonly path: string;
  /** Headers. */
  readonly headers: HeaderMap;
  /** Fires when the client goes away before its response is done. */
  readonly gone: Abortable;
  /** The client's IP address, when the server knows it. */
  readonly remote?: string;
  /** The body, read once; 413 over `max` bytes, 400 when it breaks off. */
  bytes(max: number): Promise<Uint8Array<ArrayBuffer>>;
  /** The request as a fetch `Request` (handlers of the non-inference routes). */
  request(): Promise<Request>;
}

/** The value of `name` in a header list, or null. */
export function replyHeader(h: readonly [string, string][], name: string): string | null {
  for (let i = 0; i < h.length; i++) if (h[i][0] === name) return h[i][1];
  return null;
}

/** Whether `body` is a `ChunkSource` (not bytes, a stream or null). */
export function isChunkSource(body: ReplyBody): body is ChunkSource {
  return body !== null && !(body instanceof Uint8Array) && !(body instanceof ReadableStream);
}
