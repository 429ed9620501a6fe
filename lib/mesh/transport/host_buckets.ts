/**
 * The inbound request limit of the gRPC transport: one token bucket (`core/token_bucket.ts`) per
 * remote host, refilled at `rate` requests per second and holding at most `burst`, so a single
 * flooding peer exhausts only its own allowance and the others' probes keep being answered. Time
 * comes in as an argument (milliseconds on any monotonic clock), so tests need no real time.
 * At most `maxHosts` buckets are kept: when a new host would pass that, the oldest created
 * sixteenth goes in one pass (one walk of the map's front per batch, not one per new host), so
 * spoofed or many sources cannot grow memory, and the most recent hosts keep their buckets.
 */

import { TokenBucket } from "../../core/token_bucket.ts";

/** One bucket per remote host, at most `maxHosts` of them. */
export class PerHostBuckets {
  readonly #rate: number;
  readonly #burst: number;
  readonly #maxHosts: number;
  readonly #buckets = new Map<string, TokenBucket>();

  /**
   * Buckets of `rate` per second (Infinity: never refuses) and `burst` each, for at most
   * `maxHosts` hosts.
   */
  constructor(rate: number, burst: number, maxHosts = 4096) {
    this.#rate = rate;
    this.#burst = burst;
    this.#maxHosts = maxHosts;
  }

  /** Hosts with a bucket now. */
  get size(): number {
    return this.#buckets.size;
  }

  /** Takes a token from `host`'s bucket at `now` (ms); false when none is left. */
  take(host: string, now: number): boolean {
    let b = this.#buckets.get(host);
    if (!b) {
      if (this.#buckets.size >= this.#maxHosts) this.#evict();
      b = new TokenBucket(this.#burst, this.#rate, now);
      this.#buckets.set(host, b);
    }
    return b.take(1, now);
  }

  /**
   * Drops the oldest created sixteenth (at least one) in one pass: deleting one entry per new
   * host through `keys().next()` makes V8 rescan the deleted slots at the front on every call.
   */
  #evict(): void {
    let n = Math.max(1, this.#maxHosts >> 4);
    for (const host of this.#buckets.keys()) {
      if (n-- <= 0) break;
      this.#buckets.delete(host);
    }
  }
}

/** The host part of a grpc-js peer string (`1.2.3.4:5678`, `[::1]:5678`, `ipv4:…`). */
export function peerHost(peer: string): string {
  return peer.replace(/^ipv[46]:/, "").replace(/:\d+$/, "");
}
