/**
 * Time and randomness as injectable inputs, so decision code (policies, breaker, health state,
 * SWIM) stays pure, every loop's timers can be driven by a test, and tests reproduce any
 * sequence exactly.
 *
 * `Clock` is the one time abstraction: `now()` in milliseconds on a monotonic scale (only
 * differences between two readings mean anything) and `after(ms, fn)`, a one-shot timer. The
 * composition root passes `systemClock` (performance.now and setTimeout); tests pass a
 * `FakeClock`, whose timers run, in order, only inside `advance`. `sleep`, `pause` and `every`
 * build loops on top of a clock.
 */

import { MinHeap } from "./min_heap.ts";

/** A source of the current time and of one-shot timers. */
export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  /** Runs `fn` once `ms` have passed (at once for 0 or less: on the next turn); returns its cancel. */
  after(ms: number, fn: () => void): () => void;
}

/** The process clock: `performance.now()` (immune to wall-clock jumps) and `setTimeout`. */
export const systemClock: Clock = {
  now: () => performance.now(),
  after(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(t);
  },
};

interface Timer {
  at: number;
  order: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * Fake time for tests: `now()` moves only in `advance`, which runs every timer that falls due,
 * in time order (ties in the order they were set), each seeing `now()` at its own due time.
 * A cluster of hundreds of routers runs minutes of protocol in milliseconds, deterministically.
 */
export class FakeClock implements Clock {
  #now: number;
  readonly #heap = new MinHeap<Timer>((a, b) =>
    a.at < b.at || (a.at === b.at && a.order < b.order)
  );
  #order = 0;
  readonly #listeners = new Set<() => void>();

  /** Starts at `start` ms (default 0). */
  constructor(start = 0) {
    this.#now = start;
  }

  /** The fake time. */
  now(): number {
    return this.#now;
  }

  /** Schedules `fn` at now + ms (a timer at or before now runs in the next `advance`, even of 0). */
  after(ms: number, fn: () => void): () => void {
    const t: Timer = {
      at: this.#now + Math.max(0, ms),
      order: this.#order++,
      fn,
      cancelled: false,
    };
    this.#heap.push(t);
    for (const l of this.#listeners) l();
    return () => (t.cancelled = true);
  }

  /**
   * Calls `listener` after each timer is set (a loop went to sleep on this clock, so a test
   * knows when advancing wakes it); returns its removal.
   */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Timers not yet run or cancelled. */
  get pending(): number {
    return this.#heap.values().filter((t) => !t.cancelled).length;
  }

  /** Moves time forward by `ms`, running every timer that falls due, in time order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const t = this.#heap.peek();
      if (!t || t.at > end) break;
      this.#heap.pop();
      if (t.cancelled) continue;
      this.#now = t.at;
      t.fn();
    }
    this.#now = end;
  }

  /** Advances in `step` increments until `cond()` holds or `limitMs` passes; returns whether it held. */
  advanceUntil(cond: () => boolean, limitMs: number, step = 10): boolean {
    const end = this.#now + limitMs;
    while (!cond()) {
      if (this.#now >= end) return false;
      this.advance(Math.min(step, end - this.#now));
    }
    return true;
  }
}

/** Resolves once `ms` have passed on `clock`, or rejects with the signal's reason once it aborts. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const cancel = clock.after(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Resolves once `ms` have passed on `clock`, when `signal` aborts, or when the returned `wake` is
 * called, whichever comes first; never rejects. For background loops.
 */
export function pause(
  clock: Clock,
  ms: number,
  signal: AbortSignal,
): { done: Promise<void>; wake: () => void } {
  let wake = () => {};
  const done = new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    let cancel = () => {};
    const finish = () => {
      cancel();
      signal.removeEventListener("abort", finish);
      resolve();
    };
    cancel = clock.after(ms, finish);
    wake = finish;
    signal.addEventListener("abort", finish, { once: true });
  });
  return { done, wake };
}

/** Runs `fn` every `ms` on `clock` until the returned function is called. */
export function every(clock: Clock, ms: number, fn: () => void): () => void {
  let stopped = false;
  let cancel = () => {};
  const tick = () => {
    if (stopped) return;
    cancel = clock.after(ms, tick);
    fn();
  };
  cancel = clock.after(ms, tick);
  return () => {
    stopped = true;
    cancel();
  };
}

/** A uniform random number in [0, 1). */
export type Random = () => number;

/**
 * A seeded generator (mulberry32): fast, 32-bit state, good enough for load-balancing choices
 * and jitter; not for secrets.
 */
export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A generator seeded from the OS, for production use. */
export function osRandom(): Random {
  const seed = crypto.getRandomValues(new Uint32Array(1))[0];
  return seededRandom(seed);
}

/** An integer in [0, n) drawn from `random`. */
export function randomIndex(random: Random, n: number): number {
  return Math.floor(random() * n);
}
