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
