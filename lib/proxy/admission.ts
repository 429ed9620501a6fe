/**
 * Admission control for inference routes: SMG's token bucket (`core/token_bucket.ts`;
 * `--max-concurrent-requests` is its capacity, `--rate-limit-tokens-per-second` its refill; unset
 * or 0 = no refill) with its wait queue (`--queue-size`, `--queue-timeout-secs`). A request takes
 * one token and gives it back when its response body is done (the caller releases it). Without
 * refill the bucket is a pure concurrency cap; with refill, tokens also come back at the refill rate (never above the
 * capacity), so more than the capacity may be in flight at once: the bucket then bounds the
 * admission rate (a burst of the capacity, then the refill plus what finished), as SMG's does.
 * Up to the queue size wait in FIFO order, newcomers never overtaking them; a full queue answers
 * 429 and a wait past the timeout 503, both with `Retry-After: 2`.
 *
 * Upstream's waiter on a refilling bucket gives up after the time one refill should take and is
 * answered 408, so a request queued behind others times out early; here every waiter waits up
 * to `--queue-timeout-secs`, with or without refill.
 */

import type { AdmissionConfig } from "../config/config.ts";
import type { Clock } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { Abortable } from "../core/http.ts";
import { TokenBucket } from "../core/token_bucket.ts";
import type { Metrics } from "../metrics/metrics.ts";

/** Gives a token back. */
export type Release = () => void;

const NOOP: Release = () => {};

interface Waiter {
  grant: (r: Release) => void;
  fail: (e: GatewayError) => void;
}

/** The admission bucket with its wait queue. */
export class Admission {
  readonly #cfg: AdmissionConfig;
  readonly #metrics: Metrics;
  readonly #clock: Clock;
  readonly #queue: Waiter[] = [];
  readonly #bucket: TokenBucket;
  #inUse = 0;
  /** Cancels the timer that grants the head waiter its refilled token. */
  #cancelRefill: (() => void) | null = null;

  /** A bucket; off when `maxConcurrentRequests` is -1. Timers run on `clock`. */
  constructor(cfg: AdmissionConfig, metrics: Metrics, clock: Clock) {
    this.#cfg = cfg;
    this.#metrics = metrics;
    this.#clock = clock;
    this.#bucket = new TokenBucket(
      Math.max(0, cfg.maxConcurrentRequests),
      Math.max(0, cfg.rateLimitTokensPerSecond ?? 0),
      clock.now(),
    );
  }

  /** Tokens held now (requests admitted whose response is not done). */
  get inUse(): number {
    return this.#inUse;
  }

  /** Requests waiting now. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Tokens in the bucket now (refill included). */
  get available(): number {
    return this.#bucket.level(this.#clock.now());
  }

  /**
   * A token, at once or after waiting; throws 429 when the queue is full, 503 on timeout.
   * A waiter whose `signal` fires (the client left) leaves the queue.
   */
  acquire(signal?: Abortable): Release | Promise<Release> {
    if (this.#cfg.maxConcurrentRequests < 0) return NOOP;
    if (this.#queue.length === 0 && this.#bucket.take(1, this.#clock.now())) {
      this.#metrics.rateLimit.with("allowed").inc();
      return this.#hold();
    }
    if (this.#queue.length >= this.#cfg.queueSize) {
      this.#reject("full");
      throw new GatewayError(
        429,
        "admission_queue_full",
        "too many concurrent requests and the queue is full",
        { retryAfter: 2 },
      );
    }
    if (signal?.aborted) throw new GatewayError(499, "client_closed", "client closed the request");
    return new Promise<Release>((resolve, reject) => {
      const leave = (e: GatewayError) => {
        const i = this.#queue.indexOf(waiter);
        if (i >= 0) this.#queue.splice(i, 1);
        this.#metrics.queueDepth.with().set(this.#queue.length);
        cancelTimer();
        signal?.off(onAbort);
        // The head left: the next waiter's refill is due at another time (or nobody waits).
        if (i === 0) this.#grantWaiters();
        reject(e);
      };
      const waiter: Waiter = {
        grant: (r) => {
          cancelTimer();
          signal?.off(onAbort);
          resolve(r);
        },
        fail: leave,
      };
      const cancelTimer = this.#clock.after(this.#cfg.queueTimeoutSecs * 1000, () => {
        this.#reject("timeout");
        leave(
          new GatewayError(
            503,
            "admission_queue_timeout",
            "timed out waiting for a free request slot",
            { retryAfter: 2 },
          ),
        );
      });
      const onAbort = () =>
        leave(new GatewayError(499, "client_closed", "client closed the request"));
      signal?.on(onAbort);
      this.#queue.push(waiter);
      this.#metrics.queueDepth.with().set(this.#queue.length);
      if (this.#queue.length === 1) this.#grantWaiters();
    });
  }

  /**
   * Hands tokens to waiters, oldest first, while there are any; with refill, sets a timer for
   * when the head waiter's token will have dripped in.
   */
  #grantWaiters(): void {
    this.#cancelRefill?.();
    this.#cancelRefill = null;
    const now = this.#clock.now();
    while (this.#queue.length > 0 && this.#bucket.take(1, now)) {
      const next = this.#queue.shift()!;
      this.#metrics.queueDepth.with().set(this.#queue.length);
      this.#metrics.rateLimit.with("allowed").inc();
      next.grant(this.#hold());
    }
    // Infinity without refill (or with no capacity): only a release brings a token then.
    const wait = this.#queue.length > 0 ? this.#bucket.waitMs(1, now) : Infinity;
    if (wait !== Infinity) {
      this.#cancelRefill = this.#clock.after(Math.max(1, Math.ceil(wait)), () => {
        this.#cancelRefill = null;
        this.#grantWaiters();
      });
    }
  }

  #reject(reason: "full" | "timeout"): void {
    this.#metrics.rateLimit.with("rejected").inc();
    this.#metrics.queueRejected.with(reason).inc();
  }

  /** Counts a token just taken as held; its release gives it back (never above the capacity). */
  #hold(): Release {
    this.#inUse++;
    this.#metrics.admissionInflight.with().set(this.#inUse);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse--;
      this.#metrics.admissionInflight.with().set(this.#inUse);
      this.#bucket.refund(1, this.#clock.now());
      this.#grantWaiters();
    };
  }
}
