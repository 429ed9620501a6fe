/**
 * The own HTTP/1.1 front: the main port served on `Deno.listen` instead of `Deno.serve`, so the
 * inference path builds no `Request`, `Response` or `Headers`. Why not `Deno.serve`, the
 * well-kept server: with it the same gateway costs 37 % more CPU per tiny proxied request and 26 %
 * more per relayed SSE event (`BENCHMARKS.md`, "Gateway overhead", gateway vs gateway_deno), and
 * no npm HTTP server runs cheaper under Deno (`../shared/notes/proxy-hot-path.md`). `Deno.serve`
 * stays behind `--http-server deno` (HTTP/2) and on the metrics port.
 * The gateway's entry gets a `FrontInbound` and answers a `Reply`, which is written straight to
 * the socket: head and a sized body in one write, a streamed body as chunked frames (each read of
 * the source, everything already queued, in one write), close-delimited for HTTP/1.0 clients.
 *
 * HTTP/1.1 as clients expect it: keep-alive (HTTP/1.0 only on request), `Connection: close`,
 * requests on a connection served in order (pipelined ones wait in the buffer), `Expect:
 * 100-continue`, sized and chunked request bodies, a 64 KiB head bound (431), malformed heads
 * 400 and unsupported codings 501 (then the connection closes), HEAD answered without a body, a
 * body the handler did not read closes the connection after the answer. While a request is
 * handled, a read stays posted on its connection, so a client that leaves is seen at once and
 * its `gone` fires (the proxy then cancels the worker request). A connection idle between
 * requests longer than `idleTimeoutMs` is closed. `shutdown()` stops accepting, closes idle
 * connections, lets in-flight requests finish (answered with `connection: close`), and resolves
 * when every connection is closed.
 */

import { type ChunkSource, isChunkSource, type Reply } from "../core/http.ts";
import { REASON_PHRASES } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import { headEnd, READ_BUFFER, readSpace } from "../upstream/http1_parse.ts";
import { type BodySource, FrontError, FrontInbound, parseRequestHead } from "./request.ts";

/** The gateway's entry, as the front calls it. */
export type FrontHandler = (inb: FrontInbound, completed: Promise<unknown>) => Promise<Reply>;

/** Options of `serveFront`. */
export interface FrontOptions {
  hostname: string;
  port: number;
  /** Largest body of a request handed to a non-inference handler as a `Request`. */
  maxBody: number;
  /** Idle time between requests after which a connection closes (ms; default 60 s). */
  idleTimeoutMs?: number;
  /** Largest request head (default 64 KiB). */
  maxHeadBytes?: number;
  /** Logs handler errors. */
  log: Logger;
}

/** A running front. */
export interface Front {
  readonly addr: Deno.NetAddr;
  /** Open connections. */
  readonly connections: number;
  /** Stops accepting, closes idle connections, waits for the others; resolves when all closed. */
  shutdown(): Promise<void>;
  /** Closes every connection now (the grace period is over). */
  close(): void;
}

const encoder = new TextEncoder();
/** Unread bytes a connection reads ahead while its request is handled (then it is not watched). */
const WATCH_AHEAD = 64 * 1024;
const REASONS: Record<number, string> = {
  ...REASON_PHRASES,
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No Content",
  301: "Moved Permanently",
  302: "Found",
  304: "Not Modified",
  403: "Forbidden",
  422: "Unprocessable Entity",
  431: "Request Header Fields Too Large",
  499: "Client Closed Request",
  501: "Not Implemented",
  505: "HTTP Version Not Supported",
};

/** Response headers the front writes itself. */
const FRAMING = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "date",
]);

let dateSecond = -1;
let dateLine = "";

/** `date: ...\r\n`, rebuilt once a second. */
function dateHeader(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateLine = `date: ${new Date(now).toUTCString()}\r\n`;
  }
  return dateLine;
}

/** `s` as bytes, one per character (header values are Latin-1), then `body`. */
function encodeHead(s: string, body: Uint8Array | null): Uint8Array {
  const size = body ? body.byteLength : 0;
  const out = new Uint8Array(s.length * 3 + size);
  let n = encoder.encodeInto(s, out).written;
  if (n !== s.length) {
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 0xff;
    n = s.length;
  }
  if (body) out.set(body, n);
  return out.subarray(0, n + size);
}

const LAST_CHUNK = encoder.encode("0\r\n\r\n");

/** One chunked frame of `data`, followed by the last chunk when `last`. */
function frame(data: Uint8Array, last: boolean): Uint8Array {
  const size = data.byteLength.toString(16);
  const n = size.length + 4 + data.byteLength;
  const out = new Uint8Array(last ? n + LAST_CHUNK.length : n);
  for (let i = 0; i < size.length; i++) out[i] = size.charCodeAt(i);
  out[size.length] = 13;
  out[size.length + 1] = 10;
  out.set(data, size.length + 2);
  out[n - 2] = 13;
  out[n - 1] = 10;
  if (last) out.set(LAST_CHUNK, n);
  return out;
}

/** Starts the front; `handler` answers every request. */
export function serveFront(opts: FrontOptions, handler: FrontHandler): Front {
  const listener = Deno.listen({ hostname: opts.hostname, port: opts.port });
  const addr = listener.addr as Deno.NetAddr;
  const authority = `${
    addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname
  }:${addr.port}`;
  const server = new FrontServer(opts, handler, authority);
  let closing = false;
  const accepting = (async () => {
    while (!closing) {
      let socket: Deno.TcpConn;
      try {
        socket = await listener.accept() as Deno.TcpConn;
      } catch (e) {
        if (closing) return;
        // Out of file descriptors and the like: say so, breathe, go on accepting.
        opts.log.warn("accept failed", { err: e });
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      server.serve(socket);
    }
  })();
  let stopped: Promise<void> | null = null;
  return {
    addr,
    get connections() {
      return server.conns.size;
    },
    close() {
      for (const c of server.conns) c.close();
    },
    shutdown() {
      stopped ??= (async () => {
        closing = true;
        try {
          listener.close();
        } catch { /* closed */ }
        await accepting;
        await server.drain();
      })();
      return stopped;
    },
  };
}

/** The connections of one front. */
class FrontServer {
  readonly conns = new Set<Connection>();
  readonly opts: FrontOptions;
  readonly handler: FrontHandler;
  readonly authority: string;
  readonly idleMs: number;
  readonly maxHead: number;
  draining = false;
  #sweep: ReturnType<typeof setInterval> | undefined;
  #allClosed: PromiseWithResolvers<void> | null = null;

  constructor(opts: FrontOptions, handler: FrontHandler, authority: string) {
    this.opts = opts;
    this.handler = handler;
    this.authority = authority;
    this.idleMs = opts.idleTimeoutMs ?? 60_000;
    this.maxHead = opts.maxHeadBytes ?? 64 * 1024;
  }

  serve(socket: Deno.TcpConn): void {
    try {
      socket.setNoDelay(true);
    } catch { /* closed already */ }
    const c = new Connection(socket, this);
    this.conns.add(c);
    if (this.#sweep === undefined) {
      const tick = Math.max(10, Math.min(1000, this.idleMs / 4));
      const sweep = this.#sweep = setInterval(() => this.#closeIdle(Date.now()), tick);
      Deno.unrefTimer(sweep);
    }
    c.run().finally(() => this.#gone(c));
  }

  #closeIdle(now: number): void {
    for (const c of this.conns) if (c.waiting && now - c.waitingSince > this.idleMs) c.close();
  }

  #gone(c: Connection): void {
    this.conns.delete(c);
    if (this.conns.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
      this.#allClosed?.resolve();
    }
  }

  /** Closes idle connections and waits for the busy ones. */
  drain(): Promise<void> {
    this.draining = true;
    for (const c of this.conns) if (c.waiting && c.end === c.start) c.close();
    if (this.conns.size === 0) return Promise.resolve();
    this.#allClosed ??= Promise.withResolvers<void>();
    return this.#allClosed.promise;
  }
}

/** One client connection: requests read from its buffer and answered in order. */
class Connection implements BodySource {
  readonly socket: Deno.TcpConn;
  readonly server: FrontServer;
  buf = new Uint8Array(READ_BUFFER);
  start = 0;
  end = 0;
  /** Waiting for a request head (idle between requests). */
  waiting = true;
  waitingSince = Date.now();
  closed = false;
  /** The client closed its side or the socket failed. */
  peerGone = false;
  /** The read in flight; its completion appends to the buffer. */
  #reading: Promise<void> | null = null;
  /** Bytes read so far (tells `fill` whether its wait brought any). */
  #received = 0;
  /** The request being handled. */
  #current: FrontInbound | null = null;

  constructor(socket: Deno.TcpConn, server: FrontServer) {
    this.socket = socket;
    this.server = server;
  }

  get authority(): string {
    return this.server.authority;
  }

  get maxBody(): number {
    return this.server.opts.maxBody;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.socket.close();
    } catch { /* closed */ }
  }

  /**
   * Reads more into the buffer; false at end of stream (or when closed). It waits for the read
   * already posted, if any: one read at a time, and only the read's completion moves `end`.
   */
  async fill(): Promise<boolean> {
    if (this.peerGone || this.closed) return false;
    const seen = this.#received;
    await (this.#reading ??= this.#post());
    return this.#received > seen;
  }

  /** Posts a read into the buffer (none may be pending: `readSpace` may move the bytes). */
  #post(): Promise<void> {
    return this.socket.read(readSpace(this)).then(this.#onRead, this.#onReadError);
  }

  /**
   * A read came back. While a request is handled (`#current`), another is posted at once, up to
   * `WATCH_AHEAD` unread bytes: the client leaving is then seen whatever it sent before (a
   * pipelined request, a stray CRLF), and its request's `gone` fires.
   */
  readonly #onRead = (n: number | null): void => {
    this.#reading = null;
    if (n === null || this.closed) return this.#onReadError();
    this.end += n;
    this.#received += n;
    if (this.#current && this.end - this.start < WATCH_AHEAD) this.#reading = this.#post();
  };

  readonly #onReadError = (): void => {
    this.#reading = null;
    this.peerGone = true;
    this.#current?.gone.cancel(new Error("the client closed the connection"));
  };

  /** Starts watching the connection for the client leaving while `inb` is handled. */
  #watch(inb: FrontInbound): void {
    this.#current = inb;
    if (!this.#reading && !this.peerGone && this.end - this.start < WATCH_AHEAD) {
      this.#reading = this.#post();
    }
  }

  async write(b: Uint8Array): Promise<void> {
    let off = 0;
    while (off < b.length) off += await this.socket.write(off ? b.subarray(off) : b);
  }

  /** Serves requests until the connection closes. */
  async run(): Promise<void> {
    try {
      for (;;) {
        const he = await this.#nextHead();
        if (he < 0 || !(await this.#serveOne(he))) return;
      }
    } catch (e) {
      if (e instanceof FrontError && !this.peerGone) {
        const body = encoder.encode(e.message);
        const h = `HTTP/1.1 ${e.status} ${REASONS[e.status] ?? ""}\r\n${dateHeader()}` +
          `content-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
        try {
          await this.write(encodeHead(h, body));
        } catch { /* gone */ }
      }
    } finally {
      this.close();
    }
  }

  /** Where the next request head ends in the buffer; -1 when the connection ends first. */
  async #nextHead(): Promise<number> {
    const max = this.server.maxHead;
    this.waiting = true;
    this.waitingSince = Date.now();
    // Bytes already searched, relative to `start` (the buffer may move under a read).
    let scanned = 0;
    for (;;) {
      // Empty lines before a request line are ignored (RFC 9112 §2.2).
      while (
        this.start < this.end && (this.buf[this.start] === 10 || this.buf[this.start] === 13)
      ) {
        this.start++;
      }
      const from = this.start + Math.max(0, scanned - 3);
      const he = headEnd(this.buf, from, this.end);
      if (he >= 0) {
        if (he - this.start > max) throw new FrontError(431, "request head too large");
        this.waiting = false;
        return he;
      }
      scanned = this.end - this.start;
      if (scanned > max) throw new FrontError(431, "request head too large");
      if (this.closed || (this.server.draining && this.end === this.start)) return -1;
      if (!(await this.fill())) return -1;
    }
  }

  /**
   * Serves the request whose head ends at `he`; whether the connection carries another. (Its own
   * frame, so nothing of the request stays referenced while the connection waits for the next.)
   */
  async #serveOne(he: number): Promise<boolean> {
    const s = this.server;
    const head = parseRequestHead(this.buf, this.start, he);
    this.start = he;
    const inb = new FrontInbound(head, this);
    this.#watch(inb);
    const done = Promise.withResolvers<void>();
    let reply: Reply;
    try {
      reply = await s.handler(inb, done.promise);
    } catch (e) {
      s.opts.log.error("unhandled error in request handler", { err: e });
      reply = { status: 500, headers: [], body: null };
    }
    // An HTTP/1.0 client learns where a streamed body ends only from the close.
    const sized = reply.body === null || reply.body instanceof Uint8Array;
    const keep = head.keepAlive && inb.consumed && !s.draining && !this.peerGone &&
      (sized || !head.http10);
    try {
      await this.#send(reply, head.method === "HEAD", head.http10, keep);
    } finally {
      this.#current = null;
      done.resolve();
    }
    return keep && !this.peerGone && !this.closed;
  }

  /** Writes `r`; its body's source is cancelled if the client is gone or leaves. */
  async #send(r: Reply, head: boolean, http10: boolean, keep: boolean): Promise<void> {
    const status = r.status;
    let h = `HTTP/1.1 ${status} ${REASONS[status] ?? ""}\r\n${dateHeader()}`;
    const list = r.headers;
    for (let i = 0; i < list.length; i++) {
      if (!FRAMING.has(list[i][0])) h += `${list[i][0]}: ${list[i][1]}\r\n`;
    }
    if (!keep) h += "connection: close\r\n";
    else if (http10) h += "connection: keep-alive\r\n";
    const b = r.body;
    const noBody = status === 204 || status === 304;
    if (b === null || b instanceof Uint8Array) {
      if (!noBody) h += `content-length: ${b ? b.byteLength : 0}\r\n`;
      if (this.peerGone) return;
      await this.write(encodeHead(`${h}\r\n`, head || noBody ? null : b));
      return;
    }
    const source = isChunkSource(b) ? b : readerSource(b);
    if (head || noBody || this.peerGone) {
      source.cancel();
      if (!this.peerGone) await this.write(encodeHead(`${h}\r\n`, null));
      return;
    }
    // HTTP/1.0 has no chunked coding: the body ends with the connection.
    const chunked = !http10;
    h += chunked ? "transfer-encoding: chunked\r\n\r\n" : "\r\n";
    const cancel = () => source.cancel();
    const gone = this.#current!.gone;
    gone.on(cancel);
    let pendingHead: Uint8Array | null = encodeHead(h, null);
    let ended = false;
    try {
      while (!ended) {
        const data = await source.read();
        if (this.peerGone) return;
        if (data === null) break;
        if (data.byteLength === 0) continue;
        // The source's end already arrived: the last chunk leaves with these bytes.
        ended = chunked && source.done === true;
        const out = chunked ? frame(data, ended) : data;
        if (pendingHead) {
          // The head leaves with the first bytes.
          const both = new Uint8Array(pendingHead.length + out.length);
          both.set(pendingHead);
          both.set(out, pendingHead.length);
          pendingHead = null;
          await this.write(both);
        } else await this.write(out);
      }
      if (ended) await source.read(); // null: lets the source see its end
      else if (pendingHead) await this.write(encodeHead(h, chunked ? LAST_CHUNK : null));
      else if (chunked) await this.write(LAST_CHUNK);
      else this.peerGone = true; // close-delimited: the connection ends the body
    } catch {
      this.peerGone = true;
      source.cancel();
    } finally {
      gone.off(cancel);
    }
  }
}

/** A `ReadableStream` read as a chunk source. */
function readerSource(s: ReadableStream<Uint8Array>): ChunkSource {
  const reader = s.getReader();
  return {
    read: async () => {
      const r = await reader.read();
      return r.done ? null : r.value;
    },
    cancel: () => void reader.cancel().catch(() => {}),
  };
}
