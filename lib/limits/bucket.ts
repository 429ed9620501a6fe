/**
 * One scope's pair of token buckets (a tenant's own limits, or one of its model rules): LLM
 * tokens and requests, each a `core/token_bucket.ts` holding at most a minute's worth and
 * refilling at a sixtieth of it per second, as SMG's. A request is admitted only if both hold
 * what it asks; settling to the real token count may leave the token bucket in debt (below zero),
 * which later requests wait out, and a refund never lifts it above its capacity. Pure: time is
 * passed in.
 */

import { TokenBucket } from "../core/token_bucket.ts";
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
  /** LLM tokens (a level below zero: debt). */
  readonly tokens: TokenBucket;
  /** Requests. */
  readonly requests: TokenBucket;
  /** Reservations of this scope not yet resolved (a bucket holding some is never dropped). */
  open = 0;

  /** Full buckets for `limits` at time `now` (ms). */
  constructor(limits: ScopeLimits, now: number) {
    this.tokens = new TokenBucket(limits.tokensPerMinute, limits.tokensPerMinute / 60, now);
    this.requests = new TokenBucket(limits.requestsPerMinute, limits.requestsPerMinute / 60, now);
  }

  /** Whether `tokens` and `requests` could be taken at `now` (ms). */
  dryRun(tokens: number, requests: number, now: number): DryRun {
    const ms = Math.max(this.tokens.waitMs(tokens, now), this.requests.waitMs(requests, now));
    if (ms === 0) return { allowed: true, retryAfterSecs: 0 };
    return { allowed: false, retryAfterSecs: Math.max(1, Math.ceil(ms / 1000)) };
  }

  /**
   * Takes `tokens` and `requests` at `now` (debt allowed: a peer's consumption is taken as it
   * comes).
   */
  take(tokens: number, requests: number, now: number): void {
    this.tokens.charge(tokens, now);
    this.requests.charge(requests, now);
  }

  /** Charges `delta` more tokens at `now` (a refund when negative), never above the capacity. */
  settle(delta: number, now: number): void {
    this.tokens.charge(delta, now);
  }

  /** Whether the buckets are full: the scope then behaves as a fresh one and may be dropped. */
  full(now: number): boolean {
    return this.open === 0 && this.tokens.level(now) >= this.tokens.capacity &&
      this.requests.level(now) >= this.requests.capacity;
  }
}
