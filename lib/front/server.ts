/**
 * The own HTTP/1.1 front: the main port served on `Deno.listen` instead of `Deno.serve`, so the
 * inference path builds no `Request`, `Response` or `Headers`. Why not `Deno.serve`, the
 * well-kept server: with it the same gateway costs 37 % more CPU per tiny proxied request and 26 %
 * more per relayed SSE event (`BENCHMARKS.md`, "Gateway overhead", gateway vs gateway_deno), and
 * none of the npm HTTP servers measured under Deno ran cheaper. `Deno.serve` stays behind
 * `--http-server deno` (HTTP/2) and on the metrics port. The gateway's entry gets a
 * `FrontInbound` (`request.ts`) and answers a `Reply`, which is written straight to the socket
 * (`response.ts`); each connection is served by a `Connection` (`connection.ts`). Here: the
 * listener, the idle sweep and shutdown. The listener is `Deno.listen`'s, or one given (HTTPS:
 * `tls_listener.ts`, whose certificate can be replaced while it serves).
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
 *
 * Limits on clients (`limits.ts`, all off unless given): caps on open connections, in all and
 * per client address, checked at accept; a head deadline and a body deadline (with a minimum
 * rate), checked by the same sweep that closes idle connections, so the path of a request pays
 * one clock read for a head split over reads and one for a body that is waited for, nothing per
 * byte. Each refusal is reported to `onReject`.
 */

import { type Clock, every, sleep } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import {
  bodyOverdue,
  ClientCounts,
  type FrontLimits,
  type RejectReason,
  sweepInterval,
} from "./limits.ts";
import {
  Connection,
  type ConnectionHost,
  type FrontHandler,
  type FrontSocket,
} from "./connection.ts";

export type { FrontHandler, FrontSocket } from "./connection.ts";
export type { FrontLimits, RejectReason } from "./limits.ts";

/** Where the front's connections come from (`Deno.listen`'s listener has this shape). */
export interface FrontListener {
  readonly addr: Deno.Addr;
  /** The next connection; rejects once the listener is closed. */
  accept(): Promise<FrontSocket>;
  /** Stops accepting. */
  close(): void;
  /** Resolves once everything the listener owns is released (default: at once). */
  closed?(): Promise<void>;
  /** Releases at once what `closed` waits for (the grace period is over). */
  destroy?(): void;
}

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
  /** Time of the idle sweep and of waits. */
  clock: Clock;
  /** Serves the connections of this listener instead of `Deno.listen({hostname, port})`. */
  listener?: FrontListener;
  /** Limits on clients (default: none). */
  limits?: FrontLimits;
  /** Told of each connection refused or request cut by a limit (default: nobody). */
  onReject?: (reason: RejectReason) => void;
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

/** Starts the front; `handler` answers every request. */
export function serveFront(opts: FrontOptions, handler: FrontHandler): Front {
  const listener: FrontListener = opts.listener ??
    Deno.listen({ hostname: opts.hostname, port: opts.port });
  const addr = listener.addr as Deno.NetAddr;
  const authority = `${
    addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname
  }:${addr.port}`;
  const server = new FrontServer(opts, handler, authority);
  let closing = false;
  const accepting = (async () => {
    while (!closing) {
      let socket: FrontSocket;
      try {
        socket = await listener.accept();
      } catch (e) {
        if (closing) return;
        // Out of file descriptors and the like: say so, breathe, go on accepting.
        opts.log.warn("accept failed", { err: e });
        await sleep(server.clock, 50);
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
      listener.destroy?.();
    },
    shutdown() {
      stopped ??= (async () => {
        closing = true;
        try {
          listener.close();
        } catch { /* closed */ }
        await accepting;
        await server.drain();
        await listener.closed?.();
      })();
      return stopped;
    },
  };
}

/** The connections of one front. */
class FrontServer implements ConnectionHost {
  readonly conns = new Set<Connection>();
  readonly opts: FrontOptions;
  readonly handler: FrontHandler;
  readonly authority: string;
  readonly idleMs: number;
  readonly maxHead: number;
  readonly clock: Clock;
  readonly maxConns: number;
  readonly perClient: ClientCounts;
  readonly headMs: number;
  readonly bodyTimeoutMs: number;
  readonly bodyMinRate: number;
  draining = false;
  /** Stops the idle sweep, which runs while a connection is open. */
  #stopSweep: (() => void) | null = null;
  #allClosed: PromiseWithResolvers<void> | null = null;

  constructor(opts: FrontOptions, handler: FrontHandler, authority: string) {
    this.opts = opts;
    this.handler = handler;
    this.authority = authority;
    this.idleMs = opts.idleTimeoutMs ?? 60_000;
    this.maxHead = opts.maxHeadBytes ?? 64 * 1024;
    this.clock = opts.clock;
    const l = opts.limits ?? {};
    this.maxConns = l.maxConnections ?? 0;
    this.perClient = new ClientCounts(l.maxConnectionsPerClient ?? 0);
    this.headMs = l.headTimeoutMs ?? 0;
    this.bodyTimeoutMs = l.bodyTimeoutMs ?? 0;
    this.bodyMinRate = l.bodyMinRate ?? 0;
  }

  serve(socket: FrontSocket): void {
    // Over a cap: closed before anything is read or written (`limits.ts` says why).
    if (this.maxConns > 0 && this.conns.size >= this.maxConns) {
      return this.#refuse(socket, "max_connections");
    }
    const remote = (socket.remoteAddr as Deno.NetAddr | undefined)?.hostname;
    if (!this.perClient.take(remote)) return this.#refuse(socket, "per_client");
    try {
      socket.setNoDelay?.(true);
    } catch { /* closed already */ }
    const c = new Connection(socket, this, remote);
    this.conns.add(c);
    if (this.#stopSweep === null) {
      const tick = sweepInterval(this.idleMs, this.headMs, this.bodyTimeoutMs);
      this.#stopSweep = every(this.clock, tick, () => this.#sweep(this.clock.now()));
    }
    c.run().finally(() => this.#gone(c));
  }

  #refuse(socket: FrontSocket, reason: RejectReason): void {
    try {
      socket.close();
    } catch { /* closed */ }
    this.opts.onReject?.(reason);
  }

  /** Closes idle connections; cuts heads and bodies past their deadlines. */
  #sweep(now: number): void {
    const { headMs, bodyTimeoutMs, bodyMinRate } = this;
    for (const c of this.conns) {
      if (c.waiting) {
        if (c.expiring) c.expire(); // its 408 not taken within a sweep: closed
        else if (headMs > 0 && c.headSince >= 0 && now - c.headSince > headMs) {
          this.opts.onReject?.("head_timeout");
          c.expire();
        } else if (now - c.waitingSince > this.idleMs) c.close();
      } else if (
        c.bodySince >= 0 &&
        bodyOverdue(now, c.bodySince, c.received - c.bodyBase, bodyTimeoutMs, bodyMinRate)
      ) {
        this.opts.onReject?.("body_timeout");
        c.expireBody(now);
      }
    }
  }

  #gone(c: Connection): void {
    this.perClient.give(c.remote);
    this.conns.delete(c);
    if (this.conns.size === 0) {
      this.#stopSweep?.();
      this.#stopSweep = null;
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
