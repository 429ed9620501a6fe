/**
 * The one token bucket: it holds at most `capacity` tokens and gains `ratePerSec` of them a
 * second, continuously. Pure: every operation takes `now` (ms on any monotonic clock), and a clock
 * that steps backwards adds nothing (the bucket keeps the latest time it saw, so no span of time
 * is ever counted twice). `take` refuses what is not there; `charge` takes it anyway, leaving debt
 * (a level below zero) that the refill repays; `refund` gives tokens back, never above the
 * capacity. An Infinity rate makes a bucket that never refuses and never waits; a rate of 0, one
 * that only refunds fill.
 *
 * Users: admission (`proxy/admission.ts`), the tenant limits (`limits/bucket.ts`) and the mesh
 * transport's inbound limit per host (`mesh/transport/host_buckets.ts`).
 */

/** A token bucket of `capacity` refilled at `ratePerSec`; starts full. */
export class TokenBucket {
  /** The most it holds. */
  readonly capacity: number;
  /** Tokens gained per second (Infinity: never refuses; 0: only refunds fill it). */
  readonly ratePerSec: number;
  #level: number;
  /** The latest time seen (ms). */
  #at: number;

  /** A full bucket at time `now` (ms). */
  constructor(capacity: number, ratePerSec: number, now: number) {
    this.capacity = capacity;
    this.ratePerSec = ratePerSec;
    this.#level = capacity;
    this.#at = now;
  }

  /** Tokens held at `now` (negative: debt; Infinity with an Infinity rate). */
  level(now: number): number {
    if (this.ratePerSec === Infinity) return Infinity;
    if (now > this.#at) {
      const gained = ((now - this.#at) * this.ratePerSec) / 1000;
      this.#level = Math.min(this.capacity, this.#level + gained);
      this.#at = now;
    }
    return this.#level;
  }

  /** Takes `n` tokens at `now` if the bucket holds them; false (and nothing taken) if not. */
  take(n: number, now: number): boolean {
    if (this.level(now) < n) return false;
    this.charge(n, now);
    return true;
  }

  /**
   * Takes `n` tokens at `now` whether or not they are there (debt allowed); a negative `n` is a
   * refund. The level never rises above the capacity.
   */
  charge(n: number, now: number): void {
    if (this.level(now) === Infinity) return;
    this.#level = Math.min(this.capacity, this.#level - n);
  }

  /** Gives `n` tokens back at `now`, never above the capacity. */
  refund(n: number, now: number): void {
    this.charge(-n, now);
  }

  /**
   * Milliseconds from `now` until the bucket holds `n` (0: it does now); Infinity when it never
   * will by refilling (`n` above the capacity, or a rate of 0).
   */
  waitMs(n: number, now: number): number {
    const level = this.level(now);
    if (level >= n) return 0;
    if (n > this.capacity || this.ratePerSec <= 0) return Infinity;
    return ((n - level) * 1000) / this.ratePerSec;
  }
}
