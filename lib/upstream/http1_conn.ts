/**
 * The connections of `Http1Client` (`http1.ts`): a worker's origin, one connection with its read
 * buffer and the read it keeps posted while idle, the pool of one origin, and the request's bytes.
 * The client owns the clock, the timeouts' tracking and where a finished connection goes back
 * (`ConnOwner`).
 */

import { READ_BUFFER, readSpace } from "../http1/read_buffer.ts";
import type { Cancel } from "../core/cancel.ts";
import { type HeaderList, UpstreamError, type UpstreamRequest } from "./types.ts";

/** What a connection asks of the client that owns its pool. */
export interface ConnOwner {
  /** Clock in ms. */
  readonly now: () => number;
  /** Forgets a connection's request (done, failed or cancelled). */
  untrack(c: Conn): void;
  /** A connection whose response is complete. */
  release(c: Conn): void;
}

const encoder = new TextEncoder();

/** Where a worker is: connect options and the request line's prefix. */
export interface Origin {
  key: string;
  hostname: string;
  port: number;
  tls: boolean;
  /** The `host` header value. */
  host: string;
  /** Path prefix of the base URL ("" for none). */
  prefix: string;
}

/** The origin of a worker base URL (`http://` or `https://`). */
export function parseOrigin(base: string): Origin {
  const u = new URL(base);
  const tls = u.protocol === "https:";
  if (!tls && u.protocol !== "http:") {
    throw new UpstreamError("connect", `unsupported worker URL scheme ${u.protocol}`);
  }
  const port = u.port ? Number(u.port) : tls ? 443 : 80;
  const hostname = u.hostname.replace(/^\[|\]$/g, "");
  const prefix = u.pathname === "/" ? "" : u.pathname.replace(/\/$/, "");
  return { key: base, hostname, port, tls, host: u.host, prefix };
}

/** One pooled connection. */
export class Conn {
  readonly socket: Deno.Conn;
  readonly pool: Pool;
  buf = new Uint8Array(READ_BUFFER);
  start = 0;
  end = 0;
  /** Response bytes received for the current request. */
  received = 0;
  /** Responses completed on this connection. */
  served = 0;
  idle = false;
  idleAt = 0;
  closed = false;
  /** Why it was closed by us (timeout, abort), for the error message. */
  closedBy: UpstreamError | null = null;
  /** Last time bytes arrived or the phase changed (timeouts). */
  activeAt = 0;
  /** "head" while waiting for the head, "body" while a body is read, "" otherwise. */
  phase: "" | "head" | "body" = "";
  /** The current request's head timeout (ms; 0: none). */
  headLimit = 0;
  /** The current request's body idle timeout (ms; 0: none). */
  idleLimit = 0;
  /** Whether a read of the response is waiting for the worker (a body timeout runs only then). */
  reading = false;
  /** Whether activity is tracked for the current request (it has a head or idle timeout). */
  timed = false;
  /** The current request's waiver of a passed timeout (`UpstreamRequest.excused`). */
  excused: ((phase: "head" | "body") => boolean) | undefined = undefined;
  /** The current request's early end (`UpstreamRequest.doomed`). */
  doomed: ((phase: "head" | "body") => boolean) | undefined = undefined;
  cancel: Cancel | null = null;
  #pending: Promise<number | null> | null = null;

  constructor(socket: Deno.Conn, pool: Pool) {
    this.socket = socket;
    this.pool = pool;
  }

  /** Closes the socket; pending reads and writes reject. */
  destroy(by: UpstreamError | null = null): void {
    if (this.closed) return;
    this.closed = true;
    this.closedBy ??= by;
    this.detach();
    this.pool.forget(this);
    try {
      this.socket.close();
    } catch { /* already closed */ }
  }

  /** The request was cancelled. */
  readonly onAbort = (): void => {
    this.destroy(new UpstreamError("aborted", "worker request cancelled"));
  };

  /** Stops following the request's cancellation. */
  detach(): void {
    if (this.cancel) {
      this.cancel.off(this.onAbort);
      this.cancel = null;
    }
    this.phase = "";
    this.pool.client.untrack(this);
  }

  /** Writes all of `data`. */
  async writeAll(data: Uint8Array): Promise<void> {
    let off = 0;
    while (off < data.length) off += await this.socket.write(off ? data.subarray(off) : data);
  }

  /** Reads more bytes into the buffer; false at end of stream. */
  async fill(): Promise<boolean> {
    // The body-idle clock runs only while the caller waits for the worker, not for the client.
    if (this.phase === "body" && this.timed) this.activeAt = this.pool.client.now();
    let p = this.#pending;
    if (p) this.#pending = null;
    else p = this.socket.read(readSpace(this));
    this.reading = true;
    let n: number | null;
    try {
      n = await p;
    } finally {
      this.reading = false;
    }
    if (n === null) return false;
    this.end += n;
    this.received += n;
    if (this.timed) this.activeAt = this.pool.client.now();
    return true;
  }

  /** Goes idle with a read posted, so a close by the worker is seen at once. */
  park(now: number): void {
    this.idle = true;
    this.idleAt = now;
    this.start = this.end = 0;
    if (this.buf.length > READ_BUFFER) this.buf = new Uint8Array(READ_BUFFER);
    const p = this.#pending = this.socket.read(this.buf);
    p.then(this.#onIdleRead, this.#onIdleRead);
  }

  readonly #onIdleRead = (): void => {
    // Still idle: the worker closed the connection or sent bytes nobody asked for.
    if (this.idle) this.destroy();
  };
}

/** The connections to one origin. */
export class Pool {
  readonly origin: Origin;
  readonly client: ConnOwner;
  readonly idle: Conn[] = [];
  /** Open connections, idle or busy. */
  live = 0;

  constructor(origin: Origin, client: ConnOwner) {
    this.origin = origin;
    this.client = client;
  }

  /** An idle connection young enough to reuse, or null. */
  take(now: number, maxAge: number): Conn | null {
    for (;;) {
      const c = this.idle.pop();
      if (!c) return null;
      c.idle = false;
      if (!c.closed && now - c.idleAt < maxAge) return c;
      c.destroy();
    }
  }

  /** Puts a connection whose response is complete back. */
  release(c: Conn, now: number, max: number): void {
    if (c.closed) return;
    if (this.idle.length >= max) return c.destroy();
    c.park(now);
    this.idle.push(c);
  }

  /** Drops a closed connection. */
  forget(c: Conn): void {
    this.live--;
    if (!c.idle) return;
    c.idle = false;
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }
}

/** The error a failure on `c` comes to: why we closed it, or a `closed` error wrapping `e`. */
export function closedError(c: Conn, e: unknown, what: string): UpstreamError {
  if (c.closedBy) return c.closedBy;
  if (e instanceof UpstreamError) return e;
  const msg = (e as Error)?.message ?? String(e);
  return new UpstreamError("closed", `${what}: ${msg}`, { cause: e });
}

/** The request head and body in one array. Header values are Latin-1 (ByteString) text. */
export function encodeRequest(req: UpstreamRequest, o: Origin): Uint8Array {
  const body = req.body;
  let head = `${req.method} ${o.prefix}${req.path} HTTP/1.1\r\nhost: ${o.host}\r\n`;
  if (body) head += `content-length: ${body.length}\r\n`;
  const h: HeaderList = req.headers;
  for (let i = 0; i < h.length; i++) head += `${h[i][0]}: ${h[i][1]}\r\n`;
  head += "\r\n";
  const size = body ? body.length : 0;
  const out = new Uint8Array(head.length * 3 + size);
  let n = encoder.encodeInto(head, out).written;
  if (n !== head.length) n = latin1Into(head, out);
  if (body) out.set(body, n);
  return out.subarray(0, n + size);
}

function latin1Into(s: string, out: Uint8Array): number {
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 0xff;
  return s.length;
}
