/**
 * Puts a `Gateway` on the network: the main port and the metrics port, the background loops,
 * and graceful shutdown on SIGTERM/SIGINT: readiness turns 503 at once, the listener stays open
 * for a settle window (half the grace period, at most 5 s) so load balancers notice, then new
 * connections are refused and in-flight requests and streams get the rest of the grace period,
 * both on the gateway's clock.
 */

import { ownEndpoints } from "../config/egress.ts";
import { sleep } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import { serveFront } from "../front/server.ts";
import type { Gateway } from "./app.ts";

/** A running gateway. */
export interface Listening {
  /** The main port's address. */
  addr: Deno.NetAddr;
  /** The metrics port's address. */
  metricsAddr: Deno.NetAddr;
  /** Drains and stops; resolves when everything is closed. */
  shutdown(): Promise<void>;
  /** Resolves after shutdown. */
  finished: Promise<void>;
}

/** Options for `listenGateway`. */
export interface ListenOptions {
  /** Install SIGTERM/SIGINT handlers (default true). */
  signals?: boolean;
  /** The runtime net grant as the start-up line shows it (`net_grant`); absent: not shown. */
  netGrant?: string;
}

/** What serves the main port. */
interface MainServer {
  addr: Deno.NetAddr;
  /** Stops accepting and resolves when in-flight requests are done. */
  shutdown(): Promise<void>;
  /** Closes what is left (the grace period is over). */
  close(): void;
}

/** The own HTTP/1.1 front (`--http-server own`). */
function ownFront(gw: Gateway, log: Logger): MainServer {
  const c = gw.config;
  const front = serveFront(
    { hostname: c.host, port: c.port, maxBody: c.maxPayloadSize, log, clock: gw.clock },
    gw.entry,
  );
  return { addr: front.addr, shutdown: () => front.shutdown(), close: () => front.close() };
}

/** `Deno.serve` (`--http-server deno`). */
function denoServe(gw: Gateway, log: Logger): MainServer {
  const c = gw.config;
  const server = Deno.serve({
    hostname: c.host,
    port: c.port,
    onListen: () => {},
    onError: (e) => {
      log.error("unhandled error in request handler", { err: e });
      return new Response(null, { status: 500 });
    },
  }, (req, info) => gw.handle(req, info.completed, (info.remoteAddr as Deno.NetAddr).hostname));
  // Deno.serve has no way to cut its connections; the process exits after `stop()` anyway.
  return { addr: server.addr, shutdown: () => server.shutdown(), close: () => {} };
}

/** Starts listening and the background loops. */
export function listenGateway(gw: Gateway, log: Logger, opts: ListenOptions = {}): Listening {
  const c = gw.config;
  const server = c.httpServer === "own" ? ownFront(gw, log) : denoServe(gw, log);
  const metricsServer = Deno.serve({
    hostname: c.prometheusHost,
    port: c.prometheusPort,
    onListen: () => {},
  }, gw.handleMetrics);
  // Port 0 is bound now: a worker at the real port is this gateway.
  gw.egress.setOwn([
    ...ownEndpoints(c).filter((o) => o.role === "mesh"),
    { role: "main", host: server.addr.hostname, port: server.addr.port },
    { role: "metrics", host: metricsServer.addr.hostname, port: metricsServer.addr.port },
  ]);
  gw.start();
  log.info("smg listening", {
    addr: `http://${server.addr.hostname}:${server.addr.port}`,
    metrics: `http://${metricsServer.addr.hostname}:${metricsServer.addr.port}/metrics`,
    policy: gw.policy.name,
    workers: c.workerUrls.length,
    net_grant: opts.netGrant,
  });

  let shuttingDown: Promise<void> | null = null;
  const { promise: finished, resolve: markFinished } = Promise.withResolvers<void>();
  const shutdown = () => {
    shuttingDown ??= (async () => {
      const graceMs = c.shutdownGracePeriodSecs * 1000;
      const settleMs = Math.min(graceMs / 2, 5000);
      // LEAVING goes out first, so peers stop probing this router instead of suspecting it.
      await gw.leaveMesh();
      log.info("shutting down: draining", { settle_ms: settleMs, grace_ms: graceMs });
      gw.drain();
      if (settleMs > 0) await sleep(gw.clock, settleMs);
      let cancelGrace = () => {};
      const graceOver = new Promise<"timeout">((r) => {
        cancelGrace = gw.clock.after(graceMs - settleMs, () => r("timeout"));
      });
      const how = await Promise.race([server.shutdown().then(() => "drained" as const), graceOver]);
      cancelGrace();
      if (how === "timeout") {
        log.warn("grace period over; closing remaining requests");
        server.close();
      }
      await Promise.all([metricsServer.shutdown(), gw.stop()]);
      if (opts.signals !== false) {
        Deno.removeSignalListener("SIGTERM", shutdown);
        Deno.removeSignalListener("SIGINT", shutdown);
      }
      log.info("shutdown complete");
      markFinished();
    })();
    return shuttingDown;
  };
  if (opts.signals !== false) {
    Deno.addSignalListener("SIGTERM", shutdown);
    Deno.addSignalListener("SIGINT", shutdown);
  }
  return {
    addr: server.addr,
    metricsAddr: metricsServer.addr,
    shutdown,
    finished,
  };
}
