/**
 * The gateway's HTTP/1.1 client toward workers, on `Deno.connect` (`Deno.connectTls` for
 * `https://`): a keep-alive pool per worker, one request at a time per connection (no
 * pipelining), the request head and body written at once, the response head parsed from the
 * connection's byte buffer, bodies sized, chunked or delimited by close, read as they arrive.
 *
 * Why our own parser: `fetch` costs 85-103 µs of CPU per tiny proxied request on this machine
 * and this client about a third of that (`../shared/notes/upstream-client.md`); `node:http` and
 * npm `undici` under Deno cost as much as `fetch` or more (`proxy-hot-path.md`), and no other
 * well-kept HTTP/1.1 parser runs on Deno without Node's streams in between. Response parsing is
 * a few hundred lines (`http1_parse.ts`) and strict where leniency would smuggle.
 *
 * - Pool: idle connections per origin, most recent first, at most `maxIdlePerHost`; one idle
 *   longer than `idleTimeoutMs` (`--upstream-pool-idle-timeout-secs`) is closed, not reused.
 *   Every idle connection keeps a read posted: when the worker closes it (or sends anything) while
 *   idle it leaves the pool at once; when it is reused, that same read receives the response.
 * - Stale connections: a reused connection that fails before any response byte arrived (closed,
 *   reset, write refused) means the worker closed it while idle, so it never read the request:
 *   the request is resent once on a fresh connection and is not a worker failure (`onResend`).
 * - Bodies: `whole` when a sized body is already in the buffer (the connection goes back to the
 *   pool before the caller touches it); otherwise `read()` returns everything that has arrived
 *   in one array (chunk framing removed), so queued SSE events coalesce into one write. Reading
 *   is driven by the caller: nothing is read ahead, which is the backpressure.
 * - Cancellation: the request's `Cancel` closes the connection, head or body; so does
 *   `body.cancel()`. A closed connection is never reused.
 * - Bounds: the response head (`maxHeadBytes`, 64 KiB), the connect time (`connectTimeoutMs`,
 *   10 s), the time to the head (`headTimeoutMs`) and between body bytes (`bodyIdleTimeoutMs`),
 *   both off by default: the gateway's own deadline covers those.
 */

import { bodiless, ChunkedDecoder, headEnd, parseHead, type ResponseHead } from "./http1_parse.ts";
import {
  type Cancel,
  type HeaderList,
  type Upstream,
  type UpstreamBody,
  UpstreamError,
  type UpstreamRequest,
  type UpstreamResponse,
} from "./types.ts";

/** Client settings. */
export interface Http1Options {
  /** Idle pooled connections older than this are closed (ms). */
  idleTimeoutMs: number;
  /** Idle connections kept per origin (SMG: 500). */
  maxIdlePerHost?: number;
  /** Longest response head accepted (bytes). */
  maxHeadBytes?: number;
  /** Connect timeout (ms; SMG: 10 s). */
  connectTimeoutMs?: number;
  /** Time from the request written to its whole head (ms; 0: none). */
  headTimeoutMs?: number;
  /** Longest wait for more body bytes (ms; 0: none). */
  bodyIdleTimeoutMs?: number;
  /** Called when a request is resent after a stale pooled connection. */
  onResend?: () => void;
  /** Extra CA certificates (PEM) trusted for `https://` workers, besides the system's. */
  caCerts?: string[];
  /** Clock in ms (default `Date.now`; tests). */
  now?: () => number;
}

const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);
const INITIAL_BUFFER = 16 * 1024;

/** Where a worker is: connect options and the request line's prefix. */
interface Origin {
  key: string;
  hostname: string;
  port: number;
  tls: boolean;
  /** The `host` header value. */
  host: string;
  /** Path prefix of the base URL ("" for none). */
  prefix: string;
}

function parseOrigin(base: string): Origin {
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
class Conn {
  readonly socket: Deno.Conn;
  readonly pool: Pool;
  buf = new Uint8Array(INITIAL_BUFFER);
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
    if (this.phase === "body" && this.pool.client.timed) this.activeAt = this.pool.client.now();
    let p = this.#pending;
    if (p) this.#pending = null;
    else {
      if (this.start === this.end) this.start = this.end = 0;
      else if (this.end === this.buf.length) this.#makeRoom();
      p = this.socket.read(this.buf.subarray(this.end));
    }
    const n = await p;
    if (n === null) return false;
    this.end += n;
    this.received += n;
    if (this.pool.client.timed) this.activeAt = this.pool.client.now();
    return true;
  }

  #makeRoom(): void {
    const used = this.end - this.start;
    if (this.start > 0 && used < this.buf.length / 2) {
      this.buf.copyWithin(0, this.start, this.end);
    } else {
      const bigger = new Uint8Array(this.buf.length * 2);
      bigger.set(this.buf.subarray(this.start, this.end));
      this.buf = bigger;
    }
    this.start = 0;
    this.end = used;
  }

  /** Goes idle with a read posted, so a close by the worker is seen at once. */
  park(now: number): void {
    this.idle = true;
    this.idleAt = now;
    this.start = this.end = 0;
    if (this.buf.length > INITIAL_BUFFER) this.buf = new Uint8Array(INITIAL_BUFFER);
    const p = this.#pending = this.socket.read(this.buf);
    p.then(this.#onIdleRead, this.#onIdleRead);
  }

  readonly #onIdleRead = (): void => {
    // Still idle: the worker closed the connection or sent bytes nobody asked for.
    if (this.idle) this.destroy();
  };
}

/** The connections to one origin. */
class Pool {
  readonly origin: Origin;
  readonly client: Http1Client;
  readonly idle: Conn[] = [];
  /** Open connections, idle or busy. */
  live = 0;

  constructor(origin: Origin, client: Http1Client) {
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

function closedError(c: Conn, e: unknown, what: string): UpstreamError {
  if (c.closedBy) return c.closedBy;
  if (e instanceof UpstreamError) return e;
  const msg = (e as Error)?.message ?? String(e);
  return new UpstreamError("closed", `${what}: ${msg}`, { cause: e });
}

/** The body of a response on a connection. */
class Http1Body implements UpstreamBody {
  whole: Uint8Array<ArrayBuffer> | null = null;
  readonly #client: Http1Client;
  #conn: Conn | null;
  /** Bytes of a sized body still to come; -1: chunked or to the close. */
  #remaining: number;
  readonly #chunks: ChunkedDecoder | null;
  readonly #keepAlive: boolean;
  #ranges: number[] | null = null;

  constructor(client: Http1Client, conn: Conn, head: ResponseHead, empty: boolean) {
    this.#client = client;
    this.#conn = conn;
    this.#keepAlive = head.keepAlive;
    this.#chunks = !empty && head.chunked ? new ChunkedDecoder() : null;
    this.#remaining = empty ? 0 : head.chunked ? -1 : head.length;
    if (this.#remaining === 0) {
      this.whole = EMPTY as Uint8Array<ArrayBuffer>;
      this.#finish();
    } else if (this.#remaining > 0 && conn.end - conn.start >= this.#remaining) {
      this.whole = conn.buf.slice(conn.start, conn.start + this.#remaining);
      conn.start += this.#remaining;
      this.#remaining = 0;
      this.#finish();
    }
  }

  async read(): Promise<Uint8Array<ArrayBuffer> | null> {
    if (this.whole) {
      const w = this.whole;
      this.whole = null;
      return w.length ? w : null;
    }
    const c = this.#conn;
    if (!c) return null;
    try {
      for (;;) {
        const out = this.#take(c);
        if (out) return out;
        if (!this.#conn) return null; // finished by #take
        if (!(await c.fill())) {
          if (this.#remaining === -1 && !this.#chunks) {
            this.#conn = null;
            c.destroy();
            return null;
          }
          throw new UpstreamError("closed", "worker closed the connection before the body ended");
        }
      }
    } catch (e) {
      this.#conn = null;
      const err = closedError(c, e, "worker body broke off");
      c.destroy();
      throw err;
    }
  }

  /** Payload bytes in the buffer, or null; finishes the body when its end is reached. */
  #take(c: Conn): Uint8Array<ArrayBuffer> | null {
    if (c.start === c.end) return null;
    let out: Uint8Array<ArrayBuffer> | null = null;
    if (this.#chunks) {
      const r = this.#ranges ??= [];
      r.length = 0;
      c.start = this.#chunks.decode(c.buf, c.start, c.end, r);
      if (r.length === 2) out = c.buf.slice(r[0], r[1]);
      else if (r.length > 2) {
        let n = 0;
        for (let i = 0; i < r.length; i += 2) n += r[i + 1] - r[i];
        out = new Uint8Array(n);
        let off = 0;
        for (let i = 0; i < r.length; i += 2) {
          out.set(c.buf.subarray(r[i], r[i + 1]), off);
          off += r[i + 1] - r[i];
        }
      }
      if (this.#chunks.done) this.#finish();
    } else if (this.#remaining > 0) {
      const n = Math.min(this.#remaining, c.end - c.start);
      out = c.buf.slice(c.start, c.start + n);
      c.start += n;
      this.#remaining -= n;
      if (this.#remaining === 0) this.#finish();
    } else {
      out = c.buf.slice(c.start, c.end);
      c.start = c.end;
    }
    return out;
  }

  /** The body is complete: the connection goes back to the pool (or closes). */
  #finish(): void {
    const c = this.#conn;
    if (!c) return;
    this.#conn = null;
    c.served++;
    c.detach();
    // Bytes after the response (no pipelining) mean the stream is out of step: not reused.
    if (!this.#keepAlive || c.start !== c.end) c.destroy();
    else this.#client.release(c);
  }

  cancel(): void {
    this.whole = null;
    const c = this.#conn;
    if (!c) return;
    this.#conn = null;
    c.destroy(new UpstreamError("aborted", "worker body cancelled"));
  }
}

/** The keep-alive HTTP/1.1 client (see the module comment). */
export class Http1Client implements Upstream {
  /** Clock in ms (pool ages, timeouts). */
  readonly now: () => number;
  /** Whether a head or body timeout is set (activity is then tracked). */
  readonly timed: boolean;
  readonly #pools = new Map<string, Pool>();
  readonly #idleTimeoutMs: number;
  readonly #maxIdle: number;
  readonly #maxHead: number;
  readonly #connectTimeoutMs: number;
  readonly #headTimeoutMs: number;
  readonly #bodyIdleTimeoutMs: number;
  readonly #onResend: () => void;
  readonly #caCerts: string[] | undefined;
  /** Connections with a request in progress, when a head or body timeout is set. */
  readonly #active = new Set<Conn>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #lastSweep = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** A client; nothing connects until the first request. */
  constructor(o: Http1Options) {
    this.now = o.now ?? Date.now;
    this.#idleTimeoutMs = o.idleTimeoutMs;
    this.#maxIdle = o.maxIdlePerHost ?? 500;
    this.#maxHead = o.maxHeadBytes ?? 64 * 1024;
    this.#connectTimeoutMs = o.connectTimeoutMs ?? 10_000;
    this.#headTimeoutMs = o.headTimeoutMs ?? 0;
    this.#bodyIdleTimeoutMs = o.bodyIdleTimeoutMs ?? 0;
    this.#onResend = o.onResend ?? (() => {});
    this.#caCerts = o.caCerts;
    this.timed = this.#headTimeoutMs > 0 || this.#bodyIdleTimeoutMs > 0;
  }

  /** Idle connections pooled now, over all origins. */
  get idleCount(): number {
    let n = 0;
    for (const p of this.#pools.values()) n += p.idle.length;
    return n;
  }

  async send(req: UpstreamRequest): Promise<UpstreamResponse> {
    if (this.#closed) throw new UpstreamError("connect", "client closed");
    const pool = this.#pool(req.base);
    const data = encodeRequest(req, pool.origin);
    const cancel = req.cancel;
    if (cancel.aborted) throw new UpstreamError("aborted", "worker request cancelled");
    let conn = pool.take(this.now(), this.#idleTimeoutMs);
    for (;;) {
      const reused = conn !== null;
      conn ??= await this.#connect(pool, cancel);
      conn.received = 0;
      conn.cancel = cancel;
      this.#track(conn, "head");
      cancel.on(conn.onAbort); // last: it closes the connection at once if already cancelled
      try {
        try {
          await conn.writeAll(data);
        } catch (e) {
          // A worker may answer early (413 after the head) and close before taking the whole
          // body: its answer, if there is one, is the response; else the write's failure.
          if (conn.closed) throw e;
          return await this.#response(conn, req.method).catch(() => Promise.reject(e));
        }
        return await this.#response(conn, req.method);
      } catch (e) {
        const err = closedError(conn, e, "worker connection failed");
        conn.destroy();
        if (reused && conn.received === 0 && err.kind === "closed" && !cancel.aborted) {
          this.#onResend();
          conn = null;
          continue;
        }
        throw err;
      }
    }
  }

  async #response(c: Conn, method: string): Promise<UpstreamResponse> {
    for (;;) {
      let end = -1;
      // How far into the pending bytes the blank line was looked for; relative to `c.start`,
      // since `fill` may move the bytes (compaction, growth, reset).
      let scanned = 0;
      while ((end = headEnd(c.buf, c.start + Math.max(0, scanned - 3), c.end)) < 0) {
        scanned = c.end - c.start;
        if (c.end - c.start > this.#maxHead) {
          throw new UpstreamError(
            "protocol",
            `worker response head exceeds ${this.#maxHead} bytes`,
          );
        }
        if (!(await c.fill())) {
          throw new UpstreamError(
            "closed",
            c.received === 0
              ? "worker closed the connection without answering"
              : "worker closed the connection inside the response head",
          );
        }
      }
      if (end - c.start > this.#maxHead) {
        throw new UpstreamError("protocol", `worker response head exceeds ${this.#maxHead} bytes`);
      }
      const head = parseHead(c.buf, c.start, end);
      c.start = end;
      if (head.status >= 100 && head.status < 200) {
        if (head.status === 101) throw new UpstreamError("protocol", "worker switched protocols");
        continue; // interim response (100 Continue, 103 Early Hints)
      }
      const empty = bodiless(head.status, method);
      if (!empty && !head.chunked && head.length < 0) head.keepAlive = false;
      c.phase = "body";
      if (this.timed) c.activeAt = this.now();
      const body = new Http1Body(this, c, head, empty);
      return { status: head.status, headers: head.headers, body };
    }
  }

  async #connect(pool: Pool, cancel: Cancel): Promise<Conn> {
    const o = pool.origin;
    pool.live++; // counted while connecting, so that a sweep does not drop the pool meanwhile
    const timeout = AbortSignal.timeout(this.#connectTimeoutMs);
    const both = AbortSignal.any([cancel.signal(), timeout]);
    let socket: Deno.Conn | null = null;
    try {
      if (o.tls) {
        const p = Deno.connectTls({
          hostname: o.hostname,
          port: o.port,
          alpnProtocols: ["http/1.1"],
          caCerts: this.#caCerts,
        });
        const tls: Deno.TlsConn = socket = await abortable(p, both, closeQuietly);
        // Certificate errors surface here as connect failures, not on the first write.
        await abortable(tls.handshake(), both);
      } else {
        socket = await Deno.connect({ hostname: o.hostname, port: o.port, signal: both });
        (socket as Deno.TcpConn).setNoDelay(true);
      }
    } catch (e) {
      pool.live--;
      if (socket) closeQuietly(socket);
      if (cancel.aborted) throw new UpstreamError("aborted", "worker request cancelled");
      if (timeout.aborted) {
        throw new UpstreamError(
          "connect",
          `connect to ${o.host} timed out after ${this.#connectTimeoutMs} ms`,
        );
      }
      throw new UpstreamError(
        "connect",
        `connect to ${o.host} failed: ${(e as Error)?.message ?? e}`,
        {
          cause: e,
        },
      );
    }
    try {
      (socket as Deno.TcpConn).setKeepAlive?.(true);
    } catch { /* not a TCP socket */ }
    return new Conn(socket, pool);
  }

  #pool(base: string): Pool {
    let p = this.#pools.get(base);
    if (!p) {
      p = new Pool(parseOrigin(base), this);
      this.#pools.set(base, p);
    }
    return p;
  }

  /** A connection whose response is complete. */
  release(c: Conn): void {
    const now = this.now();
    if (this.#closed) return c.destroy();
    c.pool.release(c, now, this.#maxIdle);
    if (now - this.#lastSweep > this.#idleTimeoutMs) this.#sweepIdle(now);
    this.#armIdleTimer();
  }

  /** Closes idle connections once they pass the idle timeout, also when no request comes. */
  #armIdleTimer(): void {
    if (this.#idleTimer !== undefined || this.#closed) return;
    const timer = this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      this.#sweepIdle(this.now());
      if (this.idleCount > 0) this.#armIdleTimer();
    }, Math.max(10, this.#idleTimeoutMs));
    Deno.unrefTimer(timer); // never what keeps the process alive
  }

  /** Closes idle connections past the idle timeout; drops empty pools. */
  #sweepIdle(now: number): void {
    this.#lastSweep = now;
    for (const [key, p] of this.#pools) {
      while (p.idle.length > 0 && now - p.idle[0].idleAt >= this.#idleTimeoutMs) {
        p.idle[0].destroy();
      }
      if (p.live === 0) this.#pools.delete(key);
    }
  }

  #track(c: Conn, phase: "head" | "body"): void {
    c.phase = phase;
    if (!this.timed) return;
    c.activeAt = this.now();
    this.#active.add(c);
    if (this.#timer === undefined) {
      const tick = Math.max(
        10,
        Math.min(this.#headTimeoutMs || Infinity, this.#bodyIdleTimeoutMs || Infinity) / 4,
      );
      this.#timer = setInterval(() => this.#sweepActive(), tick);
    }
  }

  /** Forgets a connection's request (done, failed or cancelled). */
  untrack(c: Conn): void {
    if (this.#active.delete(c) && this.#active.size === 0) this.#stopTimer();
  }

  #sweepActive(): void {
    const now = this.now();
    for (const c of this.#active) {
      const limit = c.phase === "head" ? this.#headTimeoutMs : this.#bodyIdleTimeoutMs;
      if (limit > 0 && now - c.activeAt >= limit) {
        const what = c.phase === "head" ? "response head" : "more body bytes";
        c.destroy(new UpstreamError("timeout", `no ${what} from the worker within ${limit} ms`));
      }
    }
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  close(): void {
    this.#closed = true;
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    for (const p of this.#pools.values()) {
      for (const c of [...p.idle]) c.destroy();
    }
    this.#pools.clear();
    this.#stopTimer();
  }
}

function closeQuietly(c: Deno.Conn): void {
  try {
    c.close();
  } catch { /* already closed */ }
}

/** Resolves with `p`, or rejects when `signal` fires (`late` disposes of what `p` yields then). */
function abortable<T>(
  p: Promise<T>,
  signal: AbortSignal,
  late: (v: T) => void = () => {},
): Promise<T> {
  if (signal.aborted) {
    p.then(late, () => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      p.then(late, () => {});
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    p.then((c) => {
      signal.removeEventListener("abort", onAbort);
      resolve(c);
    }, (e) => {
      signal.removeEventListener("abort", onAbort);
      reject(e);
    });
  });
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
