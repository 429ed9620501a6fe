/**
 * HTTP/1.1 response parsing over a byte buffer, for `http1.ts`: where the head ends, what it
 * says (status, headers, body framing, keep-alive), and a chunked-body decoder that yields the
 * payload ranges already in the buffer. Pure functions over `Uint8Array`s; no I/O.
 *
 * Strict where a lenient parser would smuggle: conflicting `content-length`s, a `content-length`
 * that is not a number, a chunk size that is not hex or a missing chunk CRLF are protocol errors.
 * Bare LF line ends are accepted (RFC 9112 §2.2).
 */

import { type HeaderList, UpstreamError } from "./types.ts";

const LF = 10;
const CR = 13;
const decoder = new TextDecoder();

/** The index just past the blank line that ends a head in `buf[from, to)`, or -1. */
export function headEnd(buf: Uint8Array, from: number, to: number): number {
  const view = buf.subarray(0, to); // no search into stale bytes past `to`
  let i = from;
  for (;;) {
    i = view.indexOf(LF, i);
    if (i < 0) return -1;
    if (i + 1 < to && buf[i + 1] === LF) return i + 2;
    if (i + 2 < to && buf[i + 1] === CR && buf[i + 2] === LF) return i + 3;
    if (i + 2 >= to) return -1;
    i++;
  }
}

/**
 * The bytes as Latin-1 text, one character per byte (header values are ByteStrings: a worker's
 * UTF-8 bytes pass through unchanged, as they did through `fetch`). ASCII, the usual case, goes
 * through the fast decoder.
 */
export function latin1(bytes: Uint8Array): string {
  const ascii = decoder.decode(bytes);
  if (ascii.length === bytes.length && !ascii.includes("\uFFFD")) return ascii;
  let out = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    out += String.fromCharCode(...bytes.subarray(i, Math.min(bytes.length, i + 4096)));
  }
  return out;
}

/** A read buffer: `buf[start, end)` holds the bytes not consumed yet. */
export interface ReadBuffer {
  buf: Uint8Array;
  start: number;
  end: number;
  /** Bytes the reader waits to have from `start` (a sized body): the buffer grows to fit at once. */
  want?: number;
}

/** Size of a fresh read buffer; an empty one larger than this is given back. */
export const READ_BUFFER = 16 * 1024;

/**
 * Where the next read goes (no read may be pending): after `end`, the buffer rewound when empty
 * (and shrunk back after a large body), given room when full.
 */
export function readSpace(b: ReadBuffer): Uint8Array {
  if (b.start === b.end) {
    b.start = b.end = 0;
    if (b.buf.length > READ_BUFFER && (b.want ?? 0) <= READ_BUFFER) {
      b.buf = new Uint8Array(READ_BUFFER);
    }
  } else if (b.end === b.buf.length) makeRoom(b);
  return b.buf.subarray(b.end);
}

/** Makes room after `end`: the live bytes move to the front, or into a bigger buffer. */
function makeRoom(b: ReadBuffer): void {
  const used = b.end - b.start;
  const want = Math.max(b.want ?? 0, used + 1);
  if (b.start > 0 && used < b.buf.length / 2 && want <= b.buf.length) {
    b.buf.copyWithin(0, b.start, b.end);
  } else {
    const bigger = new Uint8Array(Math.max(b.buf.length * 2, want));
    bigger.set(b.buf.subarray(b.start, b.end));
    b.buf = bigger;
  }
  b.start = 0;
  b.end = used;
}

/** RFC 9110 token characters (header names). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
/** Characters a response header value may not hold. */
const BAD_VALUE = /[\0\r\n]/;
/** ... and a request's: no control characters but tab (RFC 9110 §5.5). */
// deno-lint-ignore no-control-regex
const STRICT_BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;

/** `s` without optional whitespace (spaces and tabs only, RFC 9110 §5.6.3) at either end. */
function ows(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

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

function protocol(msg: string): UpstreamError {
  return new UpstreamError("protocol", `worker response is not HTTP/1.1: ${msg}`);
}

/** The header block of a head: fields, framing and `connection`. */
export interface Fields {
  /** Headers, names lower-case, in order. */
  headers: HeaderList;
  /** Body length from `content-length`; -1 when absent or overridden by chunked. */
  length: number;
  /** `transfer-encoding` ends in `chunked`. */
  chunked: boolean;
  /** Both `content-length` and `transfer-encoding` were sent (RFC 9112 §6.3: not reusable). */
  ambiguous: boolean;
  /** `connection` values joined, lower-case, or null. */
  connection: string | null;
}

/**
 * Parses the header lines of `text` from `pos` to the blank line; `fail` makes the error for a
 * malformed line. A transfer coding other than a final `chunked` is refused. `strict` (requests,
 * where a lenient server could be smuggled past a proxy in front): no folded lines, no control
 * characters in values.
 */
export function parseFields(
  text: string,
  pos: number,
  fail: (msg: string) => Error,
  strict = false,
): Fields {
  const bad = strict ? STRICT_BAD_VALUE : BAD_VALUE;
  const headers: HeaderList = [];
  let length = -1;
  let chunked = false;
  let connection: string | null = null;
  let sized = false;
  while (pos < text.length) {
    let eol = text.indexOf("\n", pos);
    if (eol < 0) eol = text.length;
    const end = text.charCodeAt(eol - 1) === CR ? eol - 1 : eol;
    if (end === pos) break; // the blank line
    const first = text.charCodeAt(pos);
    if (first === 32 || first === 9) {
      // Obsolete line folding (RFC 9112 §5.2): a server refuses it; a response's is joined to
      // the previous value with a space.
      const prev = headers[headers.length - 1];
      if (strict) throw fail("obsolete line folding");
      if (!prev) throw fail("a folded line before any header");
      prev[1] = `${prev[1]} ${ows(text.slice(pos, end))}`;
      pos = eol + 1;
      continue;
    }
    const colon = text.indexOf(":", pos);
    if (colon < 0 || colon > end) throw fail("a header line without a colon");
    const name = text.slice(pos, colon).toLowerCase();
    if (!TOKEN.test(name)) throw fail(`bad header name ${JSON.stringify(name.slice(0, 64))}`);
    const value = ows(text.slice(colon + 1, end));
    if (bad.test(value)) throw fail(`bad value of header ${name}`);
    headers.push([name, value]);
    if (name === "content-length") {
      // Repeated identical values ("5, 5") are allowed (RFC 9110 §8.6); anything else is not.
      for (const part of value.split(",")) {
        const v = ows(part);
        const n = /^\d{1,15}$/.test(v) ? Number(v) : NaN;
        if (Number.isNaN(n) || (length >= 0 && length !== n)) {
          throw fail(`bad content-length ${JSON.stringify(value)}`);
        }
        length = n;
      }
      sized = true;
    } else if (name === "transfer-encoding") {
      const codings = value.toLowerCase().split(",");
      chunked = ows(codings[codings.length - 1]) === "chunked";
      if (!chunked) throw fail(`unsupported transfer-encoding ${JSON.stringify(value)}`);
    } else if (name === "connection") {
      const v = value.toLowerCase();
      connection = connection === null ? v : `${connection},${v}`;
    }
    pos = eol + 1;
  }
  // RFC 9112 §6.3: chunked wins over a content-length.
  if (chunked) length = -1;
  return { headers, length, chunked, ambiguous: chunked && sized, connection };
}

/** Whether a connection stays open after this message (HTTP/1.0: only with keep-alive). */
export function keepsAlive(f: Fields, http10: boolean): boolean {
  const c = f.connection;
  if (f.ambiguous) return false;
  if (c === null) return !http10;
  return http10 ? /(^|,)\s*keep-alive\s*(,|$)/.test(c) : !/(^|,)\s*close\s*(,|$)/.test(c);
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
    throw protocol(`bad status line ${JSON.stringify(statusLine.slice(0, 64))}`);
  }
  const f = parseFields(text, eol + 1, protocol);
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

const SIZE = 0;
const DATA = 1;
const DATA_END = 2;
const TRAILER = 3;
const DONE = 4;

/** Longest chunk-size or trailer line accepted. */
const MAX_LINE = 4096;

/**
 * A chunked-body decoder. `decode` consumes what it can of `buf[from, to)`, pushes the payload
 * ranges it found onto `out` (start, end pairs), and returns where it stopped; a line cut off by
 * the end of the buffer is left for the next call.
 */
export class ChunkedDecoder {
  #state = SIZE;
  #remaining = 0;

  /** Whether the last chunk and the trailers have been read. */
  get done(): boolean {
    return this.#state === DONE;
  }

  /** Decodes `buf[from, to)`; see the class comment. */
  decode(buf: Uint8Array, from: number, to: number, out: number[]): number {
    let p = from;
    while (p < to && this.#state !== DONE) {
      switch (this.#state) {
        case DATA: {
          const n = Math.min(this.#remaining, to - p);
          out.push(p, p + n);
          p += n;
          this.#remaining -= n;
          if (this.#remaining === 0) this.#state = DATA_END;
          break;
        }
        case DATA_END: {
          if (buf[p] === LF) p += 1;
          else if (buf[p] === CR) {
            if (p + 1 >= to) return p;
            if (buf[p + 1] !== LF) throw protocol("chunk data not followed by CRLF");
            p += 2;
          } else throw protocol("chunk data longer than its size");
          this.#state = SIZE;
          break;
        }
        case SIZE: {
          const eol = lineEnd(buf, p, to);
          if (eol < 0) return p;
          let size = 0;
          let digits = 0;
          let i = p;
          for (; i < eol; i++) {
            const c = buf[i];
            const v = c >= 48 && c <= 57
              ? c - 48
              : c >= 97 && c <= 102
              ? c - 87
              : c >= 65 && c <= 70
              ? c - 55
              : -1;
            if (v < 0) break;
            size = size * 16 + v;
            digits++;
          }
          // hex digits, optional spaces, then `;` extensions or the line end.
          while (i < eol && (buf[i] === 32 || buf[i] === 9)) i++;
          const next = buf[i];
          if (
            digits === 0 || digits > 13 ||
            (i < eol && next !== 59 && !(next === CR && i === eol - 1))
          ) {
            throw protocol("bad chunk size");
          }
          p = eol + 1;
          if (size === 0) this.#state = TRAILER;
          else {
            this.#remaining = size;
            this.#state = DATA;
          }
          break;
        }
        case TRAILER: {
          const eol = lineEnd(buf, p, to);
          if (eol < 0) return p;
          const blank = eol === p || (eol === p + 1 && buf[p] === CR);
          p = eol + 1;
          if (blank) this.#state = DONE;
          break;
        }
      }
    }
    return p;
  }
}

/** Index of the LF ending the line that starts at `p`, or -1 when it is not all in the buffer. */
function lineEnd(buf: Uint8Array, p: number, to: number): number {
  const eol = buf.indexOf(LF, p);
  if (eol >= 0 && eol < to) return eol;
  if (to - p > MAX_LINE) throw protocol("a chunk-size or trailer line is too long");
  return -1;
}
