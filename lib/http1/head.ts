/**
 * The head of an HTTP/1.1 message, request or response, over a byte buffer: where it ends, its
 * bytes as Latin-1 text, and its header block parsed (headers in order, body framing,
 * `connection`, keep-alive). Shared by the worker client (`lib/upstream/`, which parses the
 * status line) and the front (`lib/front/`, the request line). Pure functions; no I/O.
 *
 * Strict where a lenient parser would smuggle: conflicting `content-length`s, a `content-length`
 * that is not a number, or a transfer coding other than a final `chunked` are errors (made by
 * the caller's `fail`); requests also refuse folded lines and control characters. Bare LF line
 * ends are accepted (RFC 9112 §2.2).
 */

const LF = 10;
const CR = 13;
const decoder = new TextDecoder();

/** Header name/value pairs; names lower-case. */
export type HeaderList = [string, string][];

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
