/**
 * The worker's HTTP/1.1 response head, for `http1.ts`: the status line parsed, then the header
 * block (`lib/http1/head.ts`), and whether a body follows. Malformed input is an
 * `UpstreamError` of kind `protocol`. Pure functions; no I/O.
 */

import { type HeaderList, keepsAlive, latin1, parseFields } from "../http1/head.ts";
import { UpstreamError } from "./types.ts";

const CR = 13;

/** A parsed response head. */
export interface ResponseHead {
  /** Status code. */
  status: number;
  /** Headers, names lower-case, in order. */
  headers: HeaderList;
  /** Body length from `content-length`; -1 when absent. */
  length: number;
  /** `transfer-encoding: chunked`. */
  chunked: boolean;
  /** Whether the connection may carry another request after this response. */
  keepAlive: boolean;
}

/** The error for a response that is not HTTP/1.1 as expected. */
export function protocolError(msg: string): UpstreamError {
  return new UpstreamError("protocol", `worker response is not HTTP/1.1: ${msg}`);
}

/** Parses the head in `buf[from, to)` (as found by `headEnd`). */
export function parseHead(buf: Uint8Array, from: number, to: number): ResponseHead {
  const text = latin1(buf.subarray(from, to));
  const eol = text.indexOf("\n");
  const statusLine = text.charCodeAt(eol - 1) === CR ? text.slice(0, eol - 1) : text.slice(0, eol);
  // "HTTP/1.1 200 OK": version, a space, three digits, then a space and a reason, or nothing.
  const code = statusLine.slice(9, 12);
  if (
    !statusLine.startsWith("HTTP/1.") || statusLine.charCodeAt(8) !== 32 ||
    !/^[1-5]\d\d$/.test(code) || (statusLine.length > 12 && statusLine.charCodeAt(12) !== 32)
  ) {
    throw protocolError(`bad status line ${JSON.stringify(statusLine.slice(0, 64))}`);
  }
  const f = parseFields(text, eol + 1, protocolError);
  const http10 = statusLine.charCodeAt(7) === 48; // "HTTP/1.0"
  return {
    status: Number(code),
    headers: f.headers,
    length: f.length,
    chunked: f.chunked,
    keepAlive: keepsAlive(f, http10),
  };
}

/** Whether a response with `status` to `method` has no body at all. */
export function bodiless(status: number, method: string): boolean {
  return method === "HEAD" || status === 204 || status === 304 || (status >= 100 && status < 200);
}
