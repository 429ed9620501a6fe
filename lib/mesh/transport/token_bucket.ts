/**
 * The inbound request limit of the gRPC transport: a token bucket refilled continuously at
 * `rate` per second and holding at most `burst`. Time comes in as an argument (milliseconds on
 * any monotonic clock), so the arithmetic is pure and tests need no real time. A clock that
 * steps backwards adds nothing.
 */

/** Token bucket: `rate` tokens per second, at most `burst` saved; starts full. */
export class TokenBucket {
  #rate: number;
  #burst: number;
  #tokens: number;
  #last: number | null = null;

  /** A full bucket; a `rate` of Infinity never refuses. */
  constructor(rate: number, burst: number) {
    this.#rate = rate;
    this.#burst = burst;
    this.#tokens = burst;
  }

  /** Takes one token at time `now` (ms); false when none is left. */
  take(now: number): boolean {
    if (this.#rate === Infinity) return true;
    const elapsed = this.#last === null ? 0 : Math.max(0, now - this.#last);
    this.#last = now;
    this.#tokens = Math.min(this.#burst, this.#tokens + (elapsed * this.#rate) / 1000);
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/**
 * One bucket per remote host, so a single flooding peer exhausts only its own allowance and
 * the others' probes keep being answered. At most `maxHosts` buckets are kept (the oldest
 * created goes first), so spoofed or many sources cannot grow memory.
 */
export class PerHostBuckets {
  readonly #rate: number;
  readonly #burst: number;
  readonly #maxHosts: number;
  readonly #buckets = new Map<string, TokenBucket>();

  /** Buckets of `rate` per second and `burst` each, for at most `maxHosts` hosts. */
  constructor(rate: number, burst: number, maxHosts = 4096) {
    this.#rate = rate;
    this.#burst = burst;
    this.#maxHosts = maxHosts;
  }

  /** Takes a token from `host`'s bucket at `now` (ms). */
  take(host: string, now: number): boolean {
    let b = this.#buckets.get(host);
    if (!b) {
      if (this.#buckets.size >= this.#maxHosts) {
        this.#buckets.delete(this.#buckets.keys().next().value!);
      }
      b = new TokenBucket(this.#rate, this.#burst);
      this.#buckets.set(host, b);
    }
    return b.take(now);
  }
}

/** The host part of a grpc-js peer string (`1.2.3.4:5678`, `[::1]:5678`, `ipv4:…`). */
export function peerHost(peer: string): string {
  return peer.replace(/^ipv[46]:/, "").replace(/:\d+$/, "");
}
