/**
 * What the proxy needs from an HTTP client toward workers, and nothing more: send one request,
 * get the status, the headers and a body that is read piece by piece (or is already whole).
 * Two implementations: `Http1Client` (`http1.ts`, keep-alive HTTP/1.1 on `Deno.connect`, the
 * request path's client) and `FetchUpstream` (`fetch_upstream.ts`, over `fetch`: tests' fakes,
 * HTTP/2 workers).
 */

import { concat } from "../core/bytes.ts";
import type { Cancel } from "../core/cancel.ts";
import type { HeaderList } from "../http1/head.ts";

/** Header name/value pairs; names lower-case (defined with the HTTP/1.1 parsing). */
export type { HeaderList };

/** A response body, read in order. */
export interface UpstreamBody {
  /** The whole body when it is already in hand (nothing left to read), else null. */
  readonly whole: Uint8Array<ArrayBuffer> | null;
  /**
   * The next bytes: everything that has arrived, coalesced into one array; null at the end.
   * Rejects when the body breaks off (reset, truncated, malformed framing, cancelled).
   */
  read(): Promise<Uint8Array<ArrayBuffer> | null>;
  /** Abandons the rest (the client left): the connection is closed, not reused. */
  cancel(): void;
  /** True once the end of the body has arrived (the next read returns null). */
  readonly done?: boolean;
}

/** A worker's response head and its body. */
export interface UpstreamResponse {
  /** HTTP status. */
  readonly status: number;
  /** Response headers, names lower-case, hop-by-hop ones included. */
  readonly headers: HeaderList;
  /** The body (empty for a bodiless status). */
  readonly body: UpstreamBody;
}

/** One request toward a worker. */
export interface UpstreamRequest {
  /** The worker's base URL (`http://host:port`, maybe with a path prefix). */
  base: string;
  /** Path appended to the base (`/v1/chat/completions`). */
  path: string;
  /** Method. */
  method: "GET" | "POST";
  /** Request headers (no `host`, `content-length` or hop-by-hop ones). */
  headers: HeaderList;
  /** Body bytes (POST). */
  body: Uint8Array | null;
  /** Cancels the request and its body: client gone or deadline passed. */
  cancel: Cancel;
  /**
   * Longest wait from the request written to its response head (ms), in place of the client's
   * own (`headTimeoutMs`); absent or 0: the client's. Past it the call fails with `timeout`.
   */
  headTimeoutMs?: number;
  /**
   * Longest wait for more body bytes (ms), the first ones included, in place of the client's own
   * body idle timeout; absent or 0: the client's. Past it the body's read fails with `timeout`.
   */
  idleTimeoutMs?: number;
  /**
   * Asked when a head or idle timeout passes: true waives it once (the wait starts over), for a
   * request that is slow for a reason the caller can see (its worker busy elsewhere).
   */
  excused?: (phase: "head" | "body") => boolean;
  /**
   * Asked at each check of a timed request (head, or body while read): true gives up on it now,
   * with `timeout`, before its limit (its worker stalled on other requests).
   */
  doomed?: (phase: "head" | "body") => boolean;
}

/** Why a worker call failed without a response head. */
export type UpstreamFailure =
  | "connect" // could not connect
  | "timeout" // no head (or no body bytes) within the client's timeout
  | "closed" // the connection closed or reset before the response was complete
  | "protocol" // the worker did not speak HTTP/1.1 (bad head, oversized head, bad framing)
  | "aborted"; // the request was cancelled

/** A worker call that failed; `kind` says how. */
export class UpstreamError extends Error {
  /** How it failed. */
  readonly kind: UpstreamFailure;
  /** Builds the error. */
  constructor(kind: UpstreamFailure, message: string, options?: ErrorOptions) {
    super(message, options);
    this.kind = kind;
    this.name = "UpstreamError";
  }
}

/** An HTTP client toward workers. */
export interface Upstream {
  /** Sends one request; resolves with the response head, rejects with `UpstreamError`. */
  send(req: UpstreamRequest): Promise<UpstreamResponse>;
  /** Closes pooled connections (shutdown). */
  close(): void;
}

/** The value of header `name` (lower-case) in `h`, or null. */
export function header(h: HeaderList, name: string): string | null {
  for (let i = 0; i < h.length; i++) if (h[i][0] === name) return h[i][1];
  return null;
}

/** The whole of `body`, read to its end. */
export async function readAll(body: UpstreamBody): Promise<Uint8Array<ArrayBuffer>> {
  if (body.whole) return body.whole;
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let b = await body.read(); b !== null; b = await body.read()) {
    parts.push(b);
    size += b.byteLength;
  }
  return concat(parts, size);
}
