/**
 * One scope's pair of token buckets (a tenant's own limits, or one of its model rules): LLM
 * tokens and requests, each holding at most a minute's worth and refilling at a sixtieth of it
 * per second, as SMG's. A request is admitted only if both hold what it asks; settling to the
 * real token count may leave the token bucket in debt (below zero), which later requests wait
 * out, and a refund never lifts it above its capacity. Pure: time is passed in.
 */

import type { ScopeLimits } from "./config.ts";

/** What admitting an ask would come to. */
export interface DryRun {
  /** Whether both buckets hold enough. */
  allowed: boolean;
  /** Whole seconds until they would (at least 1); Infinity when the ask exceeds a capacity. */
  retryAfterSecs: number;
}

/** The buckets of one scope. */
export class ScopeBucket {
  /** Token capacity. */
  readonly tokenCapacity: number;
  /** Request capacity. */
  readonly requestCapacity: number;
  /** Tokens available (negative: debt). */
  tokens: number;
  /** Requests available. */
  requests: number;
  /** Reservations of this scope not yet resolved (a bucket holding some is never dropped). */
  open = 0;
  #at: number;

  /** Full buckets for `limits` at time `now` (ms). */
  constructor(limits: ScopeLimits, now: number) {
    this.tokenCapacity = this.tokens = limits.tokensPerMinute;
    this.requestCapacity = this.requests = limits.requestsPerMinute;
    this.#at = now;
  }

  /** Adds the refill since the last reading (a sixtieth of the capacity per second). */
  refill(now: number): void {
    const minutes = Math.max(0, now - this.#at) / 60_000;
    this.#at = Math.max(this.#at, now);
    this.tokens = Math.min(this.tokenCapacity, this.tokens + minutes * this.tokenCapacity);
    this.requests = Math.min(this.requestCapacity, this.requests + minutes * this.requestCapacity);
  }

  /** Whether `tokens` and `requests` could be taken now (after `refill`). */
  dryRun(tokens: number, requests: number): DryRun {
    if (this.tokens >= tokens && this.requests >= requests) {
      return { allowed: true, retryAfterSecs: 0 };
    }
    if (tokens > this.tokenCapacity || requests > this.requestCapacity) {
      return { allowed: false, retryAfterSecs: Infinity };
    }
    const wait = (have: number, need: number, capacity: number) =>
      have >= need ? 0 : Math.max(1, Math.ceil(((need - have) * 60) / capacity));
    return {
      allowed: false,
      retryAfterSecs: Math.max(
        wait(this.tokens, tokens, this.tokenCapacity),
        wait(this.requests, requests, this.requestCapacity),
      ),
    };
  }

  /** Takes `tokens` and `requests` (debt allowed: a peer's consumption is taken as it comes). */
  take(tokens: number, requests: number): void {
    this.tokens -= tokens;
    this.requests -= requests;
  }

  /** Charges `delta` more tokens (a refund when negative), never above the capacity. */
  settle(delta: number): void {
    this.tokens = Math.min(this.tokenCapacity, this.tokens - delta);
  }

  /** Whether the buckets are full: the scope then behaves as a fresh one and may be dropped. */
  full(now: number): boolean {
    this.refill(now);
    return this.open === 0 && this.tokens >= this.tokenCapacity &&
      this.requests >= this.requestCapacity;
  }
}
