/**
 * The request side of the own HTTP/1.1 front (`server.ts`): the request head parsed from the
 * connection's buffer (request line, then the header-field parser shared with the worker client,
 * `lib/http1/head.ts`, strict about framing: conflicting lengths, a transfer coding other than
 * chunked, both `content-length` and `transfer-encoding`), and `FrontInbound`, the gateway's
 * `Inbound` over one request on a connection: headers as pairs, the body read on demand (sized
 * or chunked, `Expect: 100-continue` answered when the body is first wanted), the client's
 * leaving as a `Cancel`, and a fetch `Request` built only when a non-inference handler asks for
 * one.
 */

import { GatewayError, invalidRequest, payloadTooLarge } from "../core/errors.ts";
import type { HeaderMap, Inbound } from "../core/http.ts";
import { ChunkedDecoder } from "../http1/chunked.ts";
import { type Fields, type HeaderList, keepsAlive, latin1, parseFields } from "../http1/head.ts";
import type { ReadBuffer } from "../http1/read_buffer.ts";
import { Cancel } from "../core/cancel.ts";
import { concat } from "../core/bytes.ts";

/** A request the front refuses before the gateway sees it. */
export class FrontError extends Error {
  /** Status to answer (the connection closes after it). */
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

const badRequest = (msg: string) => new FrontError(400, `bad request: ${msg}`);

/** A parsed request head. */
export interface RequestHead {
  method: string;
  /** The request target as sent. */
  target: string;
  /** Its path, without the query. */
  path: string;
  http10: boolean;
  fields: Fields;
  /** Whether the connection may carry another request after this one. */
  keepAlive: boolean;
  /** `Expect: 100-continue`. */
  expectContinue: boolean;
}

const METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A host header usable in a URL: a name or address and an optional port. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(:\d{1,5})?$/;

/** Parses the head in `buf[from, to)` (as found by `headEnd`). */
export function parseRequestHead(buf: Uint8Array, from: number, to: number): RequestHead {
  const text = latin1(buf.subarray(from, to));
  const eol = text.indexOf("\n");
  const line = text.charCodeAt(eol - 1) === 13 ? text.slice(0, eol - 1) : text.slice(0, eol);
  const sp1 = line.indexOf(" ");
  const sp2 = line.indexOf(" ", sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || line.indexOf(" ", sp2 + 1) >= 0) {
    throw badRequest(`request line ${JSON.stringify(line.slice(0, 64))}`);
  }
  const method = line.slice(0, sp1);
  const target = line.slice(sp1 + 1, sp2);
  const version = line.slice(sp2 + 1);
  if (!METHOD.test(method)) throw badRequest("method is not a token");
  if (version !== "HTTP/1.1" && version !== "HTTP/1.0") {
    const hint = version === "HTTP/2.0" ? " (HTTP/2 needs --http-server deno)" : "";
    throw new FrontError(505, `HTTP version not supported: ${version.slice(0, 16)}${hint}`);
  }
  const path = pathOfTarget(target);
  if (path === null) throw badRequest(`request target ${JSON.stringify(target.slice(0, 64))}`);
  const http10 = version === "HTTP/1.0";
  let fields: Fields;
  try {
    fields = parseFields(text, eol + 1, badRequest, true);
  } catch (e) {
    if (e instanceof FrontError && e.message.includes("unsupported transfer-encoding")) {
      throw new FrontError(501, e.message);
    }
    throw e;
  }
  if (fields.ambiguous) throw badRequest("both content-length and transfer-encoding");
  // RFC 9112 §6.1: HTTP/1.0 has no transfer codings; such framing is faulty.
  if (http10 && fields.chunked) throw badRequest("transfer-encoding in an HTTP/1.0 request");
  let expectContinue = false;
  let hosts = 0;
  for (const [k, v] of fields.headers) {
    if (k === "expect" && v.toLowerCase() === "100-continue") expectContinue = !http10;
    else if (k === "host" && ++hosts > 1) throw badRequest("more than one host header");
  }
  return {
    method,
    target,
    path,
    http10,
    fields,
    keepAlive: keepsAlive(fields, http10),
    expectContinue,
  };
}

/**
 * The path of an origin-form (`/p?q`) or absolute-form (`http://h/p?q`) target, else null. An
 * absolute form must be a URL: it is the `Request` URL a handler gets.
 */
function pathOfTarget(target: string): string | null {
  let p = target;
  if (!p.startsWith("/")) {
    const scheme = p.indexOf("://");
    if (scheme <= 0) return p === "*" ? "*" : null;
    if (!URL.canParse(p)) return null;
    const slash = p.indexOf("/", scheme + 3);
    p = slash < 0 ? "/" : p.slice(slash);
  }
  const q = p.indexOf("?");
  return q < 0 ? p : p.slice(0, q);
}

/** Header pairs with `Headers`-like lookup (repeated names joined with ", "). */
export class FieldMap implements HeaderMap {
  readonly list: HeaderList;
  constructor(list: HeaderList) {
    this.list = list;
  }
  get(name: string): string | null {
    const l = this.list;
    let v: string | null = null;
    for (let i = 0; i < l.length; i++) {
      if (l[i][0] === name) v = v === null ? l[i][1] : `${v}, ${l[i][1]}`;
    }
    return v;
  }
  [Symbol.iterator](): Iterator<[string, string]> {
    return this.list[Symbol.iterator]();
  }
}

/** What a request asks of its connection. */
export interface BodySource extends ReadBuffer {
  /**
   * Reads more of the body into the buffer; false at end of stream. Held to the body deadline:
   * rejects with a 408 `GatewayError` past it.
   */
  fill(): Promise<boolean>;
  /** The body is read (or its read failed): the body deadline no longer applies (default: none). */
  endBody?(): void;
  /** Writes bytes to the client (the 100 Continue). */
  write(b: Uint8Array): Promise<void>;
  /** The front's address for building URLs ("127.0.0.1:30080"). */
  readonly authority: string;
  /** Largest body a `Request` for a non-inference handler may carry. */
  readonly maxBody: number;
  /** The client's IP address. */
  readonly remote?: string;
}

/**
 * The error a malformed chunked request body raises (the client gets a 400 quoting it). Its
 * wording is the worker client's, from when both used one decoder that always blamed a worker
 * response; kept as it was so that moving the parser changed no response.
 */
const chunkedBodyError = (msg: string) => new Error(`worker response is not HTTP/1.1: ${msg}`);

const EMPTY = new Uint8Array(0);
const CONTINUE = new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n");

/** One request on a front connection, as the gateway's `Inbound`. */
export class FrontInbound implements Inbound {
  readonly method: string;
  readonly path: string;
  readonly headers: FieldMap;
  readonly gone = new Cancel();
  readonly head: RequestHead;
  /** The body was read to its end (or there is none). */
  consumed: boolean;
  readonly #src: BodySource;

  constructor(head: RequestHead, src: BodySource) {
    this.head = head;
    this.method = head.method;
    this.path = head.path;
    this.headers = new FieldMap(head.fields.headers);
    this.#src = src;
    this.consumed = head.fields.length <= 0 && !head.fields.chunked;
  }

  /** The client's IP address. */
  get remote(): string | undefined {
    return this.#src.remote;
  }

  get url(): string {
    const t = this.head.target;
    if (!t.startsWith("/")) return t.includes("://") ? t : `http://${this.#src.authority}/`;
    const host = this.headers.get("host");
    // The pattern lets through names the URL parser refuses (`1.2.3.256`, an IPv4 out of range).
    const url = host !== null && HOST.test(host) ? `http://${host}${t}` : null;
    return url !== null && URL.canParse(url) ? url : `http://${this.#src.authority}${t}`;
  }

  /** The body, read once; 413 over `max` bytes, 400 when the client's body breaks off. */
  async bytes(max: number): Promise<Uint8Array<ArrayBuffer>> {
    if (this.consumed) return EMPTY;
    const f = this.head.fields;
    if (f.length > max) throw payloadTooLarge(max);
    const s = this.#src;
    try {
      if (this.head.expectContinue && s.end === s.start) await s.write(CONTINUE);
      const out = f.chunked ? await this.#chunked(max) : await this.#sized(f.length);
      this.consumed = true;
      return out;
    } catch (e) {
      if (e instanceof GatewayError) throw e;
      throw invalidRequest(`could not read the request body: ${(e as Error).message}`);
    } finally {
      s.endBody?.();
    }
  }

  async #sized(length: number): Promise<Uint8Array<ArrayBuffer>> {
    const s = this.#src;
    s.want = length;
    try {
      while (s.end - s.start < length) {
        if (!(await s.fill())) throw new Error("the client closed the connection");
      }
    } finally {
      s.want = 0;
    }
    const out = s.buf.slice(s.start, s.start + length);
    s.start += length;
    return out;
  }

  async #chunked(max: number): Promise<Uint8Array<ArrayBuffer>> {
    const s = this.#src;
    const dec = new ChunkedDecoder(chunkedBodyError);
    const parts: Uint8Array[] = [];
    const ranges: number[] = [];
    let size = 0;
    for (;;) {
      ranges.length = 0;
      s.start = dec.decode(s.buf, s.start, s.end, ranges);
      for (let i = 0; i < ranges.length; i += 2) {
        size += ranges[i + 1] - ranges[i];
        if (size > max) throw payloadTooLarge(max);
        parts.push(s.buf.slice(ranges[i], ranges[i + 1]));
      }
      if (dec.done) break;
      if (!(await s.fill())) throw new Error("the client closed the connection");
    }
    return concat(parts, size);
  }

  /** The request as a fetch `Request`, its body read first (at most the front's body limit). */
  async request(): Promise<Request> {
    const hasBody = !this.consumed;
    const body = hasBody ? await this.bytes(this.#src.maxBody) : null;
    const m = this.method;
    return new Request(this.url, {
      method: m,
      headers: this.headers.list,
      body: m === "GET" || m === "HEAD" ? null : body,
    });
  }
}
