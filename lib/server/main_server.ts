/**
 * What serves the main port (`--http-server`): the own HTTP/1.1 front, or `Deno.serve`; over
 * TCP, or over HTTPS when a certificate is given. Both fronts serve HTTPS through the same
 * `node:tls` listener (`lib/front/tls_listener.ts`, which says why not `Deno.listenTls` or
 * `Deno.serve`'s own `cert`/`key`): the own front reads its sockets directly; `Deno.serve` listens
 * on a loopback port and each client's decrypted stream is piped to it (`tls_pipe.ts`), which
 * costs a loopback hop per byte but keeps HTTP/2 by ALPN. `setCertificate` changes the certificate
 * for new connections on either. The TLS modules (and `node:tls`) load only with a certificate.
 * The own front enforces the client limits (`--max-connections` and the others of
 * `GatewayConfig.front`) and counts each refusal in `smg_http_front_rejected_total{reason}`;
 * `Deno.serve` has no such limits.
 */

import type { Logger } from "../core/log.ts";
import { REJECT_REASONS } from "../front/limits.ts";
import { serveFront } from "../front/server.ts";
import type { CertificatePem } from "../front/tls_listener.ts";
import type { Gateway } from "./app.ts";
import { TLS_PIPE_HOST } from "./net_grant.ts";

/** What serves the main port. */
export interface MainServer {
  /** The address clients reach. */
  addr: Deno.NetAddr;
  /** "https" with a certificate, else "http". */
  scheme: "http" | "https";
  /** `Deno.serve`'s loopback address behind the HTTPS terminator (also this gateway), or absent. */
  inner?: Deno.NetAddr;
  /** Stops accepting and resolves when in-flight requests are done. */
  shutdown(): Promise<void>;
  /** Closes what is left (the grace period is over). */
  close(): void;
  /** Serves `pem` to new connections from now on (HTTPS only; a no-op over plain HTTP). */
  setCertificate(pem: CertificatePem): void;
}

/** Starts the main port's server; `tls` null for plain HTTP. */
export async function startMainServer(
  gw: Gateway,
  log: Logger,
  tls: CertificatePem | null,
): Promise<MainServer> {
  return gw.config.httpServer === "own"
    ? await ownFront(gw, log, tls)
    : await denoServe(gw, log, tls);
}

/** The own HTTP/1.1 front (`--http-server own`). */
async function ownFront(gw: Gateway, log: Logger, tls: CertificatePem | null): Promise<MainServer> {
  const c = gw.config;
  const listener = tls
    ? await (await import("../front/tls_listener.ts")).listenTlsFront({
      hostname: c.host,
      port: c.port,
      ...tls,
    })
    : undefined;
  // Every reason's series exists from the start (reading 0), for rates and alerts.
  const rejected = new Map(REJECT_REASONS.map((r) => [r, gw.metrics.frontRejected.with(r)]));
  const l = c.front;
  const front = serveFront({
    hostname: c.host,
    port: c.port,
    maxBody: c.maxPayloadSize,
    log,
    clock: gw.clock,
    listener,
    limits: {
      maxConnections: l.maxConnections,
      maxConnectionsPerClient: l.maxConnectionsPerClient,
      headTimeoutMs: l.requestHeadTimeoutSecs * 1000,
      bodyTimeoutMs: l.requestBodyTimeoutSecs * 1000,
      bodyMinRate: l.requestBodyMinRate,
    },
    onReject: (reason) => rejected.get(reason)!.inc(),
  }, gw.entry);
  return {
    addr: front.addr,
    scheme: tls ? "https" : "http",
    shutdown: () => front.shutdown(),
    close: () => front.close(),
    setCertificate: (pem) => listener?.setCertificate(pem),
  };
}

/** `Deno.serve` (`--http-server deno`), behind the TLS listener when a certificate is given. */
async function denoServe(
  gw: Gateway,
  log: Logger,
  tls: CertificatePem | null,
): Promise<MainServer> {
  const c = gw.config;
  // Behind the terminator each request arrives over a pipe from loopback: its port names the client.
  const clients = new Map<number, string>();
  const remote = (a: Deno.NetAddr) => tls ? clients.get(a.port) : a.hostname;
  const server = Deno.serve({
    hostname: tls ? TLS_PIPE_HOST : c.host,
    port: tls ? 0 : c.port,
    onListen: () => {},
    onError: (e) => {
      log.error("unhandled error in request handler", { err: e });
      return new Response(null, { status: 500 });
    },
  }, (req, info) => gw.handle(req, info.completed, remote(info.remoteAddr as Deno.NetAddr)));
  if (!tls) {
    // Deno.serve has no way to cut its connections; the process exits after `stop()` anyway.
    return {
      addr: server.addr,
      scheme: "http",
      shutdown: () => server.shutdown(),
      close: () => {},
      setCertificate: () => {},
    };
  }
  const { TlsTerminator } = await import("../front/tls_listener.ts");
  const { pipeToLoopback } = await import("../front/tls_pipe.ts");
  const inner = server.addr;
  let t;
  try {
    t = await TlsTerminator.listen(
      { hostname: c.host, port: c.port, alpnProtocols: ["h2", "http/1.1"], ...tls },
      (s) => pipeToLoopback(s, inner.hostname, inner.port, clients),
    );
  } catch (e) {
    await server.shutdown();
    throw e;
  }
  const terminator = t;
  return {
    addr: terminator.addr,
    scheme: "https",
    inner,
    async shutdown() {
      terminator.close();
      // Deno.serve finishes in-flight requests and closes its connections; their pipes end.
      await server.shutdown();
      await terminator.closed();
    },
    close: () => terminator.destroy(),
    setCertificate: (pem) => terminator.setCertificate(pem),
  };
}
