/**
 * Request deadlines with one shared timer instead of one per request (a timer per request with
 * `AbortSignal.any` measured about 6 µs per request). Each in-flight request registers its abort
 * function and deadline; a sweep every `tickMs` on the clock aborts the expired ones. The timer
 * runs while something is registered, and until the first sweep after that.
 */

import type { Clock } from "../core/clock.ts";

/** A registered deadline; pass it back to `remove`. */
export interface DeadlineEntry {
  /** Clock time at which the request is aborted. */
  readonly at: number;
  /** Aborts the request (called as a method of the entry). */
  expire(): void;
  /** Where the entry sits in the list (-1: not registered); kept by `Deadlines`. */
  slot: number;
}

/** A set of deadlines swept on one timer. */
export class Deadlines {
  // A dense array with each entry's index in it (removal swaps in the last one), not a `Set`:
  // a Set churned by every request kept ~3 MB of dead requests alive through each young-generation
  // GC, which made those GCs ten times slower (BENCHMARKS-archive.md, "Gateway overhead", "What
  // it took").
  readonly #entries: DeadlineEntry[] = [];
  readonly #clock: Clock;
  readonly #tickMs: number;
  /** Cancels the armed sweep timer; null while none is armed. */
  #cancel: (() => void) | null = null;

  /** Sweeps every `tickMs` (the deadline's resolution). */
  constructor(clock: Clock, tickMs: number) {
    this.#clock = clock;
    this.#tickMs = tickMs;
  }

  /** Number of registered deadlines. */
  get size(): number {
    return this.#entries.length;
  }

  /** Calls `expire` once the clock passes `at`, unless removed first. */
  add(at: number, expire: () => void): DeadlineEntry {
    return this.addEntry({ at, expire, slot: -1 });
  }

  /** Registers `e` itself (an object that is its own entry saves a closure per request). */
  addEntry<E extends DeadlineEntry>(e: E): E {
    if (e.slot >= 0) return e;
    e.slot = this.#entries.length;
    this.#entries.push(e);
    if (this.#cancel === null) this.#arm();
    return e;
  }

  #arm(): void {
    this.#cancel = this.#clock.after(this.#tickMs, this.#onTimer);
  }

  readonly #onTimer = (): void => {
    this.#cancel = null;
    try {
      this.sweep();
    } finally {
      // Re-armed even if an expiry threw: the other deadlines still need their sweeps.
      if (this.#entries.length > 0 && this.#cancel === null) this.#arm();
    }
  };

  /** Forgets a deadline (the request finished). */
  remove(e: DeadlineEntry): void {
    const i = e.slot;
    const list = this.#entries;
    if (i < 0 || list[i] !== e) return;
    const last = list.pop()!;
    if (last !== e) {
      list[i] = last;
      last.slot = i;
    }
    e.slot = -1;
  }

  /**
   * Expires every deadline that has passed. The timer stops at the first sweep that finds
   * nothing registered, not at every last removal: one request at a time would otherwise pay
   * for a timer start and stop each.
   */
  sweep(): void {
    const now = this.#clock.now();
    const due: DeadlineEntry[] = [];
    for (const e of this.#entries) if (e.at <= now) due.push(e);
    for (const e of due) {
      if (e.slot < 0) continue; // removed by an earlier expire of this sweep
      this.remove(e);
      e.expire();
    }
    if (this.#entries.length === 0) this.stop();
  }

  /** Stops the timer now (shutdown); deadlines added later start it again. */
  stop(): void {
    this.#cancel?.();
    this.#cancel = null;
  }
}
