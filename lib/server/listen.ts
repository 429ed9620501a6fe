/**
 * Puts a `Gateway` on the network: the main port and the metrics port, the background loops,
 * and graceful shutdown on SIGTERM/SIGINT: readiness turns 503 at once, the listener stays open
 * for a settle window (half the grace period, at most 5 s) so load balancers notice, then new
 * connections are refused and in-flight requests and streams get the rest of the grace period,
 * both on the gateway's clock. With `--tls-cert-path` the main port serves HTTPS
 * (`main_server.ts`) and the certificate is reloaded when its files change or on SIGHUP
 * (`lib/tls/reload.ts`).
 */

import { ownEndpoints } from "../config/egress.ts";
import { sleep } from "../core/clock.ts";
import { ConfigError } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import { CertificateReloader, logCertificate } from "../tls/reload.ts";
import type { Gateway } from "./app.ts";
import { startMainServer } from "./main_server.ts";

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
  /** The certificate reloader with HTTPS, else null. */
  tls: CertificateReloader | null;
}

/** Options for `listenGateway`. */
export interface ListenOptions {
  /** Install SIGTERM/SIGINT (and with HTTPS or mesh mTLS, SIGHUP) handlers (default true). */
  signals?: boolean;
  /** The runtime net grant as the start-up line shows it (`net_grant`); absent: not shown. */
  netGrant?: string;
}

/**
 * What to grant when a mesh failed for want of a Deno permission: grpc-js reads its `GRPC_*`
 * variables (the tasks' `--allow-env` lists them), and names the host it binds.
 */
function permissionHint(failure: string): string {
  if (/Requires env access/.test(failure)) {
    return " (the mesh's gRPC library reads its GRPC_* variables: run with --allow-env, or the " +
      "list `deno task start` grants)";
  }
  if (/Requires net access/.test(failure)) {
    return " (grant --allow-net for the mesh's host and port)";
  }
  return "";
}

/**
 * Starts listening and the background loops; rejects when the main port cannot be bound, and
 * (a ConfigError, after closing what it opened) when the mesh asked for cannot start.
 */
export async function listenGateway(
  gw: Gateway,
  log: Logger,
  opts: ListenOptions = {},
): Promise<Listening> {
  const c = gw.config;
  const cert = gw.tls.server;
  const server = await startMainServer(gw, log, cert);
  let reloader: CertificateReloader | null = null;
  if (cert && c.tls.certPath !== null && c.tls.keyPath !== null) {
    logCertificate(log, "tls certificate loaded", cert, { cert: c.tls.certPath });
    reloader = new CertificateReloader({
      certPath: c.tls.certPath,
      keyPath: c.tls.keyPath,
      current: cert,
      apply: (next) => server.setCertificate(next),
      log: log.child({ module: "tls" }),
      clock: gw.clock,
    });
    reloader.start();
  }
  // SIGHUP reads every certificate again: the main port's and the features' (mesh, workers).
  const onHangup = () => {
    void reloader?.reload("SIGHUP");
    void gw.reload("SIGHUP");
  };
  const hangup = reloader !== null || gw.reloads;
  const metricsServer = Deno.serve({
    hostname: c.prometheusHost,
    port: c.prometheusPort,
    onListen: () => {},
  }, gw.handleMetrics);
  // Port 0 is bound now: a worker at the real port is this gateway.
  gw.egress.setOwn([
    ...ownEndpoints(c).filter((o) => o.role === "mesh"),
    { role: "main", host: server.addr.hostname, port: server.addr.port },
    ...(server.inner
      ? [{ role: "main", host: server.inner.hostname, port: server.inner.port }]
      : []),
    { role: "metrics", host: metricsServer.addr.hostname, port: metricsServer.addr.port },
  ]);
  await gw.start();
  const meshFailure = gw.mesh?.failure ?? null;
  if (meshFailure !== null) {
    // Asked for the mesh, a router that served without it would route alone, unseen by its
    // peers, and its operator would believe it in the cluster: it stops instead.
    await Promise.all([server.shutdown(), metricsServer.shutdown(), gw.stop(), reloader?.stop()]);
    throw new ConfigError(
      `--enable-mesh: ${meshFailure}${permissionHint(meshFailure)}; a router started with ` +
        "--enable-mesh does not serve without its mesh",
      "--enable-mesh",
    );
  }
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
      await Promise.all([metricsServer.shutdown(), gw.stop(), reloader?.stop()]);
      if (opts.signals !== false) {
        Deno.removeSignalListener("SIGTERM", shutdown);
        Deno.removeSignalListener("SIGINT", shutdown);
        if (hangup) Deno.removeSignalListener("SIGHUP", onHangup);
      }
      log.info("shutdown complete");
      markFinished();
    })();
    return shuttingDown;
  };
  if (opts.signals !== false) {
    Deno.addSignalListener("SIGTERM", shutdown);
    Deno.addSignalListener("SIGINT", shutdown);
    if (hangup) Deno.addSignalListener("SIGHUP", onHangup);
  }
  // Said only once SIGTERM drains: a supervisor may signal as soon as it reads the line.
  log.info("smg listening", {
    addr: `${server.scheme}://${server.addr.hostname}:${server.addr.port}`,
    metrics: `http://${metricsServer.addr.hostname}:${metricsServer.addr.port}/metrics`,
    policy: gw.policy.name,
    workers: c.workerUrls.length,
    net_grant: opts.netGrant,
  });
  return {
    addr: server.addr,
    metricsAddr: metricsServer.addr,
    shutdown,
    finished,
    tls: reloader,
  };
}
