/**
 * Request deadlines with one shared timer instead of a `setTimeout` per request (measured at
 * about 6 µs per request with `AbortSignal.any`). Each in-flight request registers its abort
 * function and deadline; a sweep every `tickMs` aborts the expired ones. The timer runs while
 * something is registered, and until the first sweep after that.
 */

import type { Clock } from "../core/clock.ts";

/** A registered deadline; pass it back to `remove`. */
export interface DeadlineEntry {
  /** Clock time at which the request is aborted. */
  readonly at: number;
  /** Aborts the request (called as a method of the entry). */
  expire(): void;
}

/** A set of deadlines swept on one timer. */
export class Deadlines {
  readonly #entries = new Set<DeadlineEntry>();
  readonly #clock: Clock;
  readonly #tickMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  /** Sweeps every `tickMs` (the deadline's resolution). */
  constructor(clock: Clock, tickMs: number) {
    this.#clock = clock;
    this.#tickMs = tickMs;
  }

  /** Number of registered deadlines. */
  get size(): number {
    return this.#entries.size;
  }

  /** Calls `expire` once the clock passes `at`, unless removed first. */
  add(at: number, expire: () => void): DeadlineEntry {
    return this.addEntry({ at, expire });
  }

  /** Registers `e` itself (an object that is its own entry saves a closure per request). */
  addEntry<E extends DeadlineEntry>(e: E): E {
    this.#entries.add(e);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.sweep(), this.#tickMs);
    }
    return e;
  }

  /** Forgets a deadline (the request finished). */
  remove(e: DeadlineEntry): void {
    this.#entries.delete(e);
  }

  /**
   * Expires every deadline that has passed. The timer stops at the first sweep that finds
   * nothing registered, not at every last removal: one request at a time would otherwise pay
   * for a timer start and stop each.
   */
  sweep(): void {
    const now = this.#clock.now();
    for (const e of this.#entries) {
      if (e.at <= now) {
        this.#entries.delete(e);
        e.expire();
      }
    }
    if (this.#entries.size === 0) this.stop();
  }

  /** Stops the timer now (shutdown); deadlines added later start it again. */
  stop(): void {
    if (this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
