/**
 * The clients the composition root builds toward workers, all with the workers' TLS settings:
 * the worker control (health, models, loads, info; over `fetch` on one keep-alive pool for HTTP
 * workers, over their RPCs for gRPC ones), the inference client, the gRPC workers' clients, and
 * the proxy's view of gRPC workers (their clients, and the gateway's tokenizer behind its
 * two-level cache).
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { GrpcBackend } from "../proxy/types.ts";
import { CachedEncoder } from "../tokenizer/cache.ts";
import { TokenizerPool } from "../tokenizer/pool.ts";
import type { GatewayTokenizer } from "../tokenizer/tokenizer.ts";
import { FetchUpstream } from "../upstream/fetch_upstream.ts";
import { Http1Client } from "../upstream/http1.ts";
import type { Upstream } from "../upstream/types.ts";
import { controlByScheme, type WorkerControl } from "../workers/control.ts";
import type { FetchFn } from "../workers/http.ts";
import { httpWorkerControl } from "../workers/http_control.ts";
import { grpcWorkerControl } from "../proxy/grpc/control.ts";
import { type GrpcClientFactory, GrpcWorkers } from "../proxy/grpc/workers.ts";
import type { WorkerTls } from "../tls/pem.ts";
import type { WorkerTlsSource } from "../tls/worker_tls.ts";

/** What `workerClients` builds from; `fetch`, `upstream` and `grpc` are tests' or optional. */
export interface WorkerClientOptions {
  /** Validated configuration (the pool's idle time). */
  config: GatewayConfig;
  /** CAs and client certificate toward workers, as they are now (read at each connection). */
  tls: WorkerTlsSource;
  /** The gateway's clock (the inference pool's idle timers). */
  clock: Clock;
  /** Called when the inference client sends a request again on a fresh connection. */
  onResend: () => void;
  /**
   * `fetch` of the HTTP worker control (default `workerFetch`); also the inference client
   * without `upstream`.
   */
  fetch?: FetchFn;
  /** Inference client (default `Http1Client`, or a `FetchUpstream` over `fetch`). */
  upstream?: Upstream;
  /** gRPC client factory; absent: the gateway serves no gRPC workers. */
  grpc?: GrpcClientFactory;
  /** Where a start-up warning about the workers' TLS goes. */
  log: Logger;
}

/** The gateway's clients toward workers. */
export interface WorkerClients {
  /** Calls to workers besides inference: HTTP workers over `fetch`, gRPC ones over RPCs. */
  control: WorkerControl;
  /** The inference client toward HTTP workers. */
  upstream: Upstream;
  /** The gRPC workers' clients. */
  grpc: GrpcWorkers;
  /** Releases pools and channels (at shutdown). */
  close(): void;
}

/**
 * Whether node:tls may list the system's root CAs: grpc-js trusts only the CAs it is given, so
 * `--ca-cert-paths` toward `grpcs://` workers is joined to them (`sglang_client.ts`), which Deno
 * allows with `--allow-sys=ca`.
 */
function mayReadSystemCas(): boolean {
  const ca = { name: "sys", kind: "ca" } as unknown as Deno.SysPermissionDescriptor;
  return Deno.permissions.querySync(ca).state === "granted";
}

/** Builds the clients toward workers, each with `o.tls`, renewed when it changes. */
export function workerClients(o: WorkerClientOptions): WorkerClients {
  const { config, tls } = o;
  const httpFetch = o.fetch ?? workerFetch(config, tls);
  const make = o.grpc;
  if (make && tls.current.caCerts.length > 0 && !mayReadSystemCas()) {
    o.log.warn(
      "grpcs:// workers trust only --ca-cert-paths: reading the system's CAs needs --allow-sys=ca",
    );
  }
  const grpc = new GrpcWorkers(make ? (url) => make(url, tls.current) : null);
  const stopRenewing = tls.onChange(() => grpc.renew());
  const upstream = o.upstream ??
    (o.fetch ? new FetchUpstream(o.fetch) : new Http1Client({
      idleTimeoutMs: config.upstreamPoolIdleTimeoutSecs * 1000,
      onResend: o.onResend,
      tls: () => tls.current,
      clock: o.clock,
    }));
  return {
    control: controlByScheme(
      httpWorkerControl(httpFetch),
      grpcWorkerControl((url) => grpc.client(url)),
    ),
    upstream,
    grpc,
    close() {
      stopRenewing();
      upstream.close();
      (httpFetch as { close?: () => void }).close?.();
      void grpc.close();
    },
  };
}

/**
 * The default worker client: one keep-alive pool whose idle connections close after the
 * configured time, never following redirects, trusting `tls.caCerts` besides the system's and
 * presenting `tls.client` to `https://` workers; a new pool when they change (the previous one
 * kept for the requests under way); `close()` releases the pools at shutdown.
 */
export function workerFetch(
  config: GatewayConfig,
  source: WorkerTlsSource,
): FetchFn & { close?: () => void } {
  const pool = (tls: WorkerTls) =>
    Deno.createHttpClient({
      poolIdleTimeout: config.upstreamPoolIdleTimeoutSecs * 1000,
      http2: false,
      caCerts: tls.caCerts,
      ...(tls.client ? { cert: tls.client.cert, key: tls.client.key } : {}),
    });
  let client = pool(source.current);
  const previous: Deno.HttpClient[] = [];
  const off = source.onChange((tls) => {
    previous.push(client);
    client = pool(tls);
  });
  const fetchFn: FetchFn & { close?: () => void } = (url, init) => {
    (init as RequestInit & { client: Deno.HttpClient }).client = client;
    // A worker's redirect is an answer, not a place to go: following it would reach a host the
    // egress allow-list never saw (169.254.169.254, say).
    (init as RequestInit).redirect = "manual";
    return fetch(url, init);
  };
  fetchFn.close = () => {
    off();
    for (const c of [...previous, client]) c.close();
  };
  return fetchFn;
}

/**
 * The proxy's view of gRPC workers: their clients, and the tokenizer behind a two-level cache,
 * what the cache misses encoded by `threads` tokenizer threads (`--tokenizer-threads`; a thread
 * that fails or hangs is logged and its work done on the event loop; `clock` times the hang).
 */
export function grpcBackend(
  workers: GrpcWorkers,
  tok: GatewayTokenizer,
  threads: number,
  log: Logger,
  clock: Clock,
): GrpcBackend {
  const cache = new CachedEncoder(tok);
  const pool = new TokenizerPool(tok, threads, {
    clock,
    onThreadDown: (reason) =>
      log.warn("tokenizer thread failed; encoding on the event loop", { reason }),
  });
  const many = (parts: string[], addSpecial: boolean) => pool.encodeMany(parts, addSpecial);
  return {
    client: (url) => workers.client(url),
    close: () => pool.close(),
    tokenizer: {
      encode: (text, addSpecial) => cache.encode(text, addSpecial),
      encodeAsync: (text, addSpecial) => cache.encodeWith(text, addSpecial, many),
      pendingChars: (text, addSpecial) => cache.pendingChars(text, addSpecial),
      applyChatTemplate: (messages, o) => tok.applyChatTemplate(messages, o),
      decode: (ids, skipSpecial) => tok.decode(ids, skipSpecial),
      hasChatTemplate: tok.hasChatTemplate,
      maxLength: tok.maxLength,
      eosTokenIds: tok.eosTokenIds,
    },
  };
}
