/**
 * Admission control for inference routes (`--max-concurrent-requests`, `--queue-size`,
 * `--queue-timeout-secs`): at most N requests hold a slot, up to Q wait in FIFO order, a full
 * queue answers 429 and a wait past the timeout 503, both with `Retry-After: 2`. A slot is held
 * until the response body is done (the caller releases it).
 */

import type { AdmissionConfig } from "../config/config.ts";
import { type Clock, systemClock } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { Abortable } from "../core/http.ts";
import type { Metrics } from "../metrics/metrics.ts";

/** Gives a slot back. */
export type Release = () => void;

const NOOP: Release = () => {};

interface Waiter {
  grant: (r: Release) => void;
  fail: (e: GatewayError) => void;
}

/** The concurrency limiter with its wait queue. */
export class Admission {
  readonly #cfg: AdmissionConfig;
  readonly #metrics: Metrics;
  readonly #clock: Clock;
  readonly #queue: Waiter[] = [];
  #inUse = 0;

  /** A limiter; off when `maxConcurrentRequests` is -1. Queue timeouts run on `clock` (system). */
  constructor(cfg: AdmissionConfig, metrics: Metrics, clock: Clock = systemClock) {
    this.#cfg = cfg;
    this.#metrics = metrics;
    this.#clock = clock;
  }

  /** Slots held now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** Requests waiting now. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * A slot, at once or after waiting; throws 429 when the queue is full, 503 on timeout.
   * A waiter whose `signal` fires (the client left) leaves the queue.
   */
  acquire(signal?: Abortable): Release | Promise<Release> {
    const max = this.#cfg.maxConcurrentRequests;
    if (max < 0) return NOOP;
    if (this.#inUse < max && this.#queue.length === 0) {
      this.#metrics.rateLimit.with("allowed").inc();
      return this.#take();
    }
    if (this.#queue.length >= this.#cfg.queueSize) {
      this.#reject("full");
      throw new GatewayError(
        429,
        "admission_queue_full",
        "too many concurrent requests and the queue is full",
        {
          retryAfter: 2,
        },
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
            {
              retryAfter: 2,
            },
          ),
        );
      });
      const onAbort = () =>
        leave(new GatewayError(499, "client_closed", "client closed the request"));
      signal?.on(onAbort);
      this.#queue.push(waiter);
      this.#metrics.queueDepth.with().set(this.#queue.length);
    });
  }

  #reject(reason: "full" | "timeout"): void {
    this.#metrics.rateLimit.with("rejected").inc();
    this.#metrics.queueRejected.with(reason).inc();
  }

  #take(): Release {
    this.#inUse++;
    this.#metrics.admissionInflight.with().set(this.#inUse);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse--;
      const next = this.#queue.shift();
      this.#metrics.queueDepth.with().set(this.#queue.length);
      this.#metrics.admissionInflight.with().set(this.#inUse);
      if (next) {
        this.#metrics.rateLimit.with("allowed").inc();
        next.grant(this.#take());
      }
    };
  }
}
