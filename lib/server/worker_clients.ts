/**
 * The clients the composition root builds toward workers: the `fetch` of the control paths
 * (health, models, loads, info) over one keep-alive pool, with the workers' TLS settings, and the
 * proxy's view of gRPC workers (their clients, and the gateway's tokenizer behind its two-level
 * cache).
 */

import type { GatewayConfig } from "../config/config.ts";
import type { GrpcBackend } from "../proxy/types.ts";
import { CachedEncoder } from "../tokenizer/cache.ts";
import type { GatewayTokenizer } from "../tokenizer/tokenizer.ts";
import type { FetchFn } from "../workers/http.ts";
import type { GrpcWorkers } from "./grpc_workers.ts";
import type { WorkerTls } from "../tls/pem.ts";

/**
 * The default worker client: one keep-alive pool whose idle connections close after the
 * configured time, trusting `tls.caCerts` besides the system's and presenting `tls.client` to
 * `https://` workers; `close()` releases the pool at shutdown.
 */
export function workerFetch(
  config: GatewayConfig,
  tls: WorkerTls,
): FetchFn & { close?: () => void } {
  const client = Deno.createHttpClient({
    poolIdleTimeout: config.upstreamPoolIdleTimeoutSecs * 1000,
    http2: false,
    caCerts: tls.caCerts,
    ...(tls.client ? { cert: tls.client.cert, key: tls.client.key } : {}),
  });
  const fetchFn: FetchFn & { close?: () => void } = (url, init) => {
    (init as RequestInit & { client: Deno.HttpClient }).client = client;
    return fetch(url, init);
  };
  fetchFn.close = () => client.close();
  return fetchFn;
}

/** The proxy's view of gRPC workers: their clients, and the tokenizer behind a two-level cache. */
export function grpcBackend(workers: GrpcWorkers, tok: GatewayTokenizer): GrpcBackend {
  const cache = new CachedEncoder(tok);
  return {
    client: (url) => workers.client(url),
    tokenizer: {
      encode: (text, addSpecial) => cache.encode(text, addSpecial),
      applyChatTemplate: (messages, o) => tok.applyChatTemplate(messages, o),
      decode: (ids, skipSpecial) => tok.decode(ids, skipSpecial),
      hasChatTemplate: tok.hasChatTemplate,
      maxLength: tok.maxLength,
      eosTokenIds: tok.eosTokenIds,
    },
  };
}
