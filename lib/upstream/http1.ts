/**
 * The gateway's HTTP/1.1 client toward workers, on `Deno.connect` (`Deno.connectTls` for
 * `https://`, with extra CAs and a client certificate when given): a keep-alive pool per worker,
 * one request at a time per connection (no pipelining), the request head and body written at
 * once, the response head parsed from the connection's byte buffer, bodies sized, chunked or
 * delimited by close, read as they arrive.
 *
 * Connections and the pool are in `http1_conn.ts`, bodies in `http1_body.ts`, the response head
 * in `http1_response.ts`, the parsing shared with the front in `lib/http1/`.
 *
 * Why our own parser: `fetch` costs 85-103 µs of CPU per tiny proxied request on this machine
 * and a bare keep-alive client on `Deno.connect` about a third of that (24-35 µs, measured under
 * the same `Deno.serve` front before this client was written); this client, with chunking and
 * errors, about half (BENCHMARKS.md, "Gateway overhead": `connect_floor` against `floor`);
 * `node:http` and npm `undici` under Deno cost as much as `fetch` or more (79 and 86 µs per
 * request against `fetch`'s 67 µs in an earlier comparison of the three), and no other well-kept
 * HTTP/1.1 parser runs on Deno without Node's streams in between. Response parsing is a few
 * hundred lines (`http1_response.ts`, `lib/http1/`) and strict where leniency would
 * smuggle.
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
 *   10 s), the time to the head (`headTimeoutMs`, or a request's own) and between body bytes
 *   (`bodyIdleTimeoutMs`, or a request's own), both off by default: the gateway's own deadline
 *   covers those. A request may waive a passed one (`excused`: the wait starts over).
 * - Time: pool ages, the idle sweep and the head and body-idle timeouts read and run on the
 *   given `Clock`; the connect timeout is the socket's own (`AbortSignal.timeout`).
 */

import { type Clock, every } from "../core/clock.ts";
import { Http1Body } from "./http1_body.ts";
import {
  closedError,
  Conn,
  type ConnOwner,
  encodeRequest,
  parseOrigin,
  Pool,
} from "./http1_conn.ts";
import { headEnd } from "../http1/head.ts";
import { bodiless, parseHead } from "./http1_response.ts";
import type { Cancel } from "../core/cancel.ts";
import {
  type Upstream,
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
  /**
   * What `https://` workers are reached with, read at each new connection (so a renewed client
   * certificate is presented from the next one on): extra CA certificates (PEM) trusted besides
   * the system's, and the chain and key presented to workers that ask (mTLS). Default: neither.
   */
  tls?: () => TlsToWorkers;
  /** The gateway's clock: pool ages, sweeps and timeouts. */
  clock: Clock;
}

/** What `https://` workers are reached with (`Http1Options.tls`). */
export interface TlsToWorkers {
  /** Extra CA certificates (PEM), besides the system's. */
  caCerts: string[];
  /** The chain and key (PEM) presented to workers that ask, or null. */
  client: { cert: string; key: string } | null;
}

const NO_TLS_TO_WORKERS: TlsToWorkers = { caCerts: [], client: null };

/** The keep-alive HTTP/1.1 client (see the module comment). */
export class Http1Client implements Upstream, ConnOwner {
  /** Clock in ms (pool ages, timeouts). */
  readonly now: () => number;
  readonly #pools = new Map<string, Pool>();
  readonly #idleTimeoutMs: number;
  readonly #maxIdle: number;
  readonly #maxHead: number;
  readonly #connectTimeoutMs: number;
  readonly #headTimeoutMs: number;
  readonly #bodyIdleTimeoutMs: number;
  readonly #onResend: () => void;
  readonly #tls: () => TlsToWorkers;
  /** Connections with a request in progress, when a head or body timeout is set. */
  readonly #active = new Set<Conn>();
  readonly #clock: Clock;
  /** Stops the active sweep's timer; null while none runs. */
  #stopActiveSweep: (() => void) | null = null;
  /** The active sweep's interval (ms) while it runs. */
  #sweepTick = Infinity;
  #lastSweep = 0;
  /** Cancels the idle sweep's timer; null while none is armed. */
  #cancelIdleSweep: (() => void) | null = null;
  #closed = false;

  /** A client; nothing connects until the first request. */
  constructor(o: Http1Options) {
    const clock = this.#clock = o.clock;
    this.now = () => clock.now();
    this.#idleTimeoutMs = o.idleTimeoutMs;
    this.#maxIdle = o.maxIdlePerHost ?? 500;
    this.#maxHead = o.maxHeadBytes ?? 64 * 1024;
    this.#connectTimeoutMs = o.connectTimeoutMs ?? 10_000;
    this.#headTimeoutMs = o.headTimeoutMs ?? 0;
    this.#bodyIdleTimeoutMs = o.bodyIdleTimeoutMs ?? 0;
    this.#onResend = o.onResend ?? (() => {});
    this.#tls = o.tls ?? (() => NO_TLS_TO_WORKERS);
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
      conn.headLimit = req.headTimeoutMs || this.#headTimeoutMs;
      conn.idleLimit = req.idleTimeoutMs || this.#bodyIdleTimeoutMs;
      conn.timed = conn.headLimit > 0 || conn.idleLimit > 0;
      conn.excused = req.excused;
      conn.doomed = req.doomed;
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
      if (c.timed) c.activeAt = this.now();
      const body = new Http1Body(c, head, empty);
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
        const { caCerts, client } = this.#tls();
        const p = Deno.connectTls({
          hostname: o.hostname,
          port: o.port,
          alpnProtocols: ["http/1.1"],
          caCerts,
          ...(client ? { cert: client.cert, key: client.key } : {}),
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

  /**
   * Closes idle connections once they pass the idle timeout, also when no request comes. Armed
   * only while connections are idle; `close()` cancels it.
   */
  #armIdleTimer(): void {
    if (this.#cancelIdleSweep !== null || this.#closed) return;
    this.#cancelIdleSweep = this.#clock.after(Math.max(10, this.#idleTimeoutMs), () => {
      this.#cancelIdleSweep = null;
      this.#sweepIdle(this.now());
      if (this.idleCount > 0) this.#armIdleTimer();
    });
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
    const shortest = Math.min(c.headLimit || Infinity, c.idleLimit || Infinity);
    if (shortest === Infinity) return;
    c.activeAt = this.now();
    this.#active.add(c);
    // Checked at a quarter of the limit, at least every second: a miss is seen within 1 s of it.
    const tick = Math.max(10, Math.min(1000, shortest / 4));
    if (tick < this.#sweepTick) {
      // None runs yet, or it runs too seldom for this request's limit.
      this.#stopTimer();
      this.#sweepTick = tick;
      this.#stopActiveSweep = every(this.#clock, tick, () => this.#sweepActive());
    }
  }

  /** Forgets a connection's request (done, failed or cancelled). */
  untrack(c: Conn): void {
    if (this.#active.delete(c) && this.#active.size === 0) this.#stopTimer();
  }

  #sweepActive(): void {
    const now = this.now();
    for (const c of this.#active) {
      const limit = c.phase === "head" ? c.headLimit : c.idleLimit;
      // A body's clock runs while the caller waits for the worker, not while the client does.
      if (c.phase === "body" && !c.reading) continue;
      if (c.phase !== "" && c.doomed?.(c.phase)) {
        const e = new UpstreamError("timeout", "the worker stalled; given up on before its answer");
        c.destroy(e);
        continue;
      }
      if (limit > 0 && now - c.activeAt >= limit) {
        if (c.phase !== "" && c.excused?.(c.phase)) {
          c.activeAt = now;
          continue;
        }
        const what = c.phase === "head" ? "response head" : "more body bytes";
        c.destroy(new UpstreamError("timeout", `no ${what} from the worker within ${limit} ms`));
      }
    }
  }

  #stopTimer(): void {
    this.#stopActiveSweep?.();
    this.#stopActiveSweep = null;
    this.#sweepTick = Infinity;
  }

  close(): void {
    this.#closed = true;
    this.#cancelIdleSweep?.();
    this.#cancelIdleSweep = null;
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
