/**
 * One client connection of the own HTTP/1.1 front (`server.ts`): requests read from its buffer
 * and answered in order (pipelined ones wait in the buffer), each head found within the front's
 * bound and parsed (`request.ts`), handed to the gateway's entry as a `FrontInbound`, and its
 * `Reply` written (`response.ts`). While a request is handled, a read stays posted, so a client
 * that leaves is seen at once and its request's `gone` fires. A body the handler did not read
 * closes the connection after the answer; so does a draining front. The front's sweep
 * (`server.ts`) reads when the head and the body started, and cuts a connection past its deadline
 * (`limits.ts`): `expire` answers an overdue head, `expireBody` fails an overdue body's read.
 */

import type { Clock } from "../core/clock.ts";
import type { Reply } from "../core/http.ts";
import type { Logger } from "../core/log.ts";
import { headEnd } from "../http1/head.ts";
import { READ_BUFFER, readSpace } from "../http1/read_buffer.ts";
import { bodyTimeoutError } from "./limits.ts";
import { type BodySource, FrontError, FrontInbound, parseRequestHead } from "./request.ts";
import { errorResponse, writeReply } from "./response.ts";

/**
 * A client connection's byte stream: a `Deno.TcpConn`, or a TLS socket behind the same shape
 * (`node_socket.ts`). `read` resolves null at the end of the stream; `write` with the bytes taken.
 */
export interface FrontSocket {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
  setNoDelay?(noDelay?: boolean): void;
  /** The client's address (a `Deno.TcpConn`'s; a TLS socket's as it connected). */
  readonly remoteAddr?: Deno.Addr;
}

/** The gateway's entry, as the front calls it. */
export type FrontHandler = (inb: FrontInbound, completed: Promise<unknown>) => Promise<Reply>;

/** What a connection reads from the front that accepted it. */
export interface ConnectionHost {
  /** The gateway's entry. */
  readonly handler: FrontHandler;
  /** The front's address for building URLs ("127.0.0.1:30080"). */
  readonly authority: string;
  /** Largest request head. */
  readonly maxHead: number;
  /** The largest body of a `Request` for a non-inference handler, and the logger. */
  readonly opts: { readonly maxBody: number; readonly log: Logger };
  /** The front is shutting down: idle connections close, busy ones after their answer. */
  readonly draining: boolean;
  /** When a connection started waiting for its next request (the idle sweep reads it). */
  readonly clock: Clock;
  /** The body deadline (ms; 0: none): body reads then also wait for `expireBody`. */
  readonly bodyTimeoutMs: number;
}

/** Unread bytes a connection reads ahead while its request is handled (then it is not watched). */
const WATCH_AHEAD = 64 * 1024;

/** One client connection: requests read from its buffer and answered in order. */
export class Connection implements BodySource {
  readonly socket: FrontSocket;
  readonly server: ConnectionHost;
  buf = new Uint8Array(READ_BUFFER);
  start = 0;
  end = 0;
  /** Waiting for a request head (idle between requests). */
  waiting = true;
  waitingSince: number;
  /**
   * When the head being waited for started (accept, for the first request; its first byte, for
   * the next ones); -1 while no byte of it has come. The sweep holds it to the head deadline.
   */
  headSince: number;
  /** When the body being read started to be waited for; -1 when none is. */
  bodySince = -1;
  /** Bytes received before the body being read (`received - bodyBase`: its bytes so far). */
  bodyBase = 0;
  /** The client's address, as counted against the per-client cap. */
  readonly remote: string | undefined;
  closed = false;
  /** The client closed its side or the socket failed. */
  peerGone = false;
  /** The read in flight; its completion appends to the buffer. */
  #reading: Promise<void> | null = null;
  /** Bytes read so far (tells `#more` whether its wait brought any). */
  #received = 0;
  /** The request being handled. */
  #current: FrontInbound | null = null;
  /** Rejected by `expireBody` while a body is read. */
  #overdue: PromiseWithResolvers<never> | null = null;
  /** The 408 for an overdue head, being written; the connection then closes. */
  #expired: Promise<void> | null = null;

  /** Serves `socket` from `remote` (its address, read by the front at accept). */
  constructor(socket: FrontSocket, server: ConnectionHost, remote: string | undefined) {
    this.socket = socket;
    this.server = server;
    this.remote = remote;
    this.waitingSince = this.headSince = server.clock.now();
  }

  get authority(): string {
    return this.server.authority;
  }

  /** Bytes read from the client so far. */
  get received(): number {
    return this.#received;
  }

  /** A 408 for the overdue head is being written (the connection closes after it). */
  get expiring(): boolean {
    return this.#expired !== null;
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
  async #more(): Promise<boolean> {
    if (this.peerGone || this.closed) return false;
    const seen = this.#received;
    await (this.#reading ??= this.#post());
    return this.#received > seen;
  }

  /**
   * Reads more of a request body into the buffer; false at end of stream. The body's wait starts
   * (the sweep holds it to the body deadline) and ends early with a 408 error when `expireBody`
   * finds it overdue; `endBody` ends it.
   */
  fill(): Promise<boolean> {
    if (this.server.bodyTimeoutMs <= 0) return this.#more();
    if (this.#overdue === null) {
      this.bodySince = this.server.clock.now();
      // The body's bytes already buffered count as received.
      this.bodyBase = this.#received - (this.end - this.start);
      this.#overdue = Promise.withResolvers<never>();
      this.#overdue.promise.catch(() => {});
    }
    return Promise.race([this.#more(), this.#overdue.promise]);
  }

  /** The request body was read, or its read failed: its deadline no longer applies. */
  endBody(): void {
    this.bodySince = -1;
    this.#overdue = null;
  }

  /** The body being read is overdue: its read fails with a 408 error. */
  expireBody(now: number): void {
    const bytes = this.#received - this.bodyBase;
    this.#overdue?.reject(bodyTimeoutError(bytes, now - this.bodySince));
    this.endBody();
  }

  /**
   * The head being waited for is overdue: a 408, then the connection closes. Only while
   * `waiting` (nothing else writes then); a second call (the 408 not taken within a sweep, the
   * client reading nothing) closes at once.
   */
  expire(): void {
    if (this.#expired) return this.close();
    if (this.closed) return;
    const close = () => this.close();
    this.#expired = this.write(errorResponse(408, "request head timeout")).then(close, close);
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
        try {
          await this.write(errorResponse(e.status, e.message));
        } catch { /* gone */ }
      }
    } finally {
      if (this.#expired) await this.#expired;
      this.close();
    }
  }

  /** Where the next request head ends in the buffer; -1 when the connection ends first. */
  async #nextHead(): Promise<number> {
    const max = this.server.maxHead;
    this.waiting = true;
    this.waitingSince = this.server.clock.now();
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
      if (this.closed || (this.server.draining && scanned === 0)) return -1;
      // A head begun and not complete: its deadline runs from now (or from accept).
      if (scanned > 0 && this.headSince < 0) this.headSince = this.server.clock.now();
      if (!(await this.#more()) || this.#expired) return -1;
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
    this.headSince = -1;
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
      await writeReply(this, reply, head.method === "HEAD", head.http10, keep, inb.gone);
    } finally {
      this.#current = null;
      done.resolve();
    }
    return keep && !this.peerGone && !this.closed;
  }
}
