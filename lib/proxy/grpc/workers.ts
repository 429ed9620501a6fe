/**
 * The gRPC workers' clients (one `SglangClient`, so one channel, per worker URL, made on first
 * use and reused) and the control paths over them. Health probes, model discovery, load
 * polling, `/get_server_info`, `/get_model_info` and `/flush_cache` call workers through a
 * `FetchFn` on `{url}{path}`; `controlFetch` answers those paths for `grpc://` workers with the
 * matching RPC, shaped as the HTTP worker's JSON (same field names: sglang's `/v1/loads` and
 * `GetLoads` share them), so the health checker, load monitor and info API are the same code for
 * both kinds of worker. Other URLs go to the HTTP `FetchFn`.
 */

import { isGrpcUrl } from "../../config/validate.ts";
import type { SglangClient, WorkerTlsPem } from "../../grpc/sglang_client.ts";
import type { FetchFn } from "../../workers/http.ts";

/**
 * Makes the client of one worker URL (`new SglangClient`, imported only when gRPC is on), with
 * what `grpcs://` workers are reached with (CAs, client certificate).
 */
export type GrpcClientFactory = (url: string, tls: WorkerTlsPem) => SglangClient;

/** Default time for a control RPC when the caller's signal sets none. */
const CONTROL_TIMEOUT_MS = 10_000;

/** One client per gRPC worker URL, and one more for its KV-event stream. */
export class GrpcWorkers {
  readonly #clients = new Map<string, SglangClient>();
  readonly #events = new Map<string, SglangClient>();
  readonly #http: FetchFn;
  readonly #make: ((url: string) => SglangClient) | null;

  /** `make` is null when the gateway serves no gRPC workers (then none get here). */
  constructor(http: FetchFn, make: ((url: string) => SglangClient) | null) {
    this.#http = http;
    this.#make = make;
  }

  /** The client of `url` (a normalized `grpc://` or `grpcs://` worker URL). */
  client(url: string): SglangClient {
    return this.#get(this.#clients, url);
  }

  /**
   * The client of `url`'s KV-event subscription: its own channel, so its own connection. The
   * event stream carries every stored block's token ids; on the generations' connection its
   * frames queue with their first tokens and share their flow-control window.
   */
  eventsClient(url: string): SglangClient {
    return this.#get(this.#events, url);
  }

  /** Drops the clients of a removed worker. */
  forget(url: string): void {
    for (const map of [this.#clients, this.#events]) {
      const c = map.get(url);
      if (!c) continue;
      map.delete(url);
      void c.close();
    }
  }

  /** Closes every channel. */
  async close(): Promise<void> {
    const all = [...this.#clients.values(), ...this.#events.values()];
    this.#clients.clear();
    this.#events.clear();
    await Promise.all(all.map((c) => c.close()));
  }

  #get(map: Map<string, SglangClient>, url: string): SglangClient {
    let c = map.get(url);
    if (!c) {
      if (!this.#make) throw new Error(`gRPC worker ${url} without gRPC support`);
      c = this.#make(url);
      map.set(url, c);
    }
    return c;
  }

  /** `fetch` for the control paths: gRPC workers through their RPCs, others over HTTP. */
  readonly controlFetch: FetchFn = (url, init) => {
    const m = /^(grpcs?:\/\/[^/]+)(\/[^?]*)/.exec(url);
    if (!m || !isGrpcUrl(m[1])) return this.#http(url, init);
    return this.#control(m[1], m[2], init.signal ?? undefined);
  };

  async #control(base: string, path: string, signal?: AbortSignal): Promise<Response> {
    const c = this.client(base);
    const ms = CONTROL_TIMEOUT_MS;
    const call = async (): Promise<Response> => {
      switch (path) {
        case "/health":
        case "/health_generate": {
          const h = await c.healthCheck(ms);
          return h.healthy ? new Response("OK") : new Response(h.message, { status: 503 });
        }
        case "/v1/models": {
          const i = await c.modelInfo(ms);
          const id = i.served_model_name || i.model_path;
          return Response.json({
            object: "list",
            data: [{
              id,
              object: "model",
              owned_by: "sglang",
              root: i.model_path,
              max_model_len: i.max_context_length,
            }],
          });
        }
        case "/get_model_info":
          return Response.json(await c.modelInfo(ms));
        case "/get_server_info":
          return Response.json(await c.serverInfo(ms));
        case "/v1/loads":
          return Response.json(await c.loads(ms));
        case "/flush_cache": {
          const r = await c.flushCache(ms);
          return new Response(r.message, { status: r.success ? 200 : 400 });
        }
        default:
          return new Response(`no gRPC equivalent of ${path}`, { status: 404 });
      }
    };
    if (signal?.aborted) throw signal.reason;
    try {
      return await (signal
        ? Promise.race([
          call(),
          new Promise<never>((_, reject) =>
            signal.addEventListener("abort", () => reject(signal.reason), { once: true })
          ),
        ])
        : call());
    } catch (e) {
      const status = (e as { statusName?: unknown }).statusName;
      // A failed call (`GrpcCallError`) is a transport error to the caller, as with fetch.
      if (typeof status === "string") {
        throw new TypeError(`gRPC ${status}: ${(e as Error).message}`);
      }
      throw e;
    }
  }
}
