/**
 * The gRPC workers' clients: one `SglangClient`, so one channel, per worker URL, made on first
 * use and reused by generations and control calls (`control.ts`), and one more per worker for
 * its KV-event stream; a removed worker's are closed, and every one is renewed when the client
 * certificate is.
 */

import type { SglangClient, WorkerTlsPem } from "../../grpc/sglang_client.ts";

/**
 * Makes the client of one worker URL (`new SglangClient`, imported only when gRPC is on), with
 * what `grpcs://` workers are reached with (CAs, client certificate).
 */
export type GrpcClientFactory = (url: string, tls: WorkerTlsPem) => SglangClient;

/** One client per gRPC worker URL, and one more for its KV-event stream. */
export class GrpcWorkers {
  readonly #clients = new Map<string, SglangClient>();
  readonly #events = new Map<string, SglangClient>();
  readonly #make: ((url: string) => SglangClient) | null;

  /** `make` is null when the gateway serves no gRPC workers (then none get here). */
  constructor(make: ((url: string) => SglangClient) | null) {
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

  /**
   * Closes every channel to new calls (those under way finish on it): the next call of each
   * worker opens a new one, with what workers are reached with now (a renewed certificate).
   */
  renew(): void {
    const all = [...this.#clients.values(), ...this.#events.values()];
    this.#clients.clear();
    this.#events.clear();
    for (const c of all) void c.close();
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
}
