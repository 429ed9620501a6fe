/**
 * Time and randomness as injectable inputs, so decision code (policies, breaker, health state)
 * stays pure and tests reproduce any sequence exactly.
 *
 * `Clock.now()` is milliseconds on a monotonic scale (performance.now by default); only
 * differences between two readings mean anything.
 */

/** A source of the current time in milliseconds; only differences are meaningful. */
export interface Clock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
}

/** The process clock: `performance.now()`, immune to wall-clock jumps. */
export const systemClock: Clock = { now: () => performance.now() };

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  #t: number;
  /** Starts at `start` ms (default 0). */
  constructor(start = 0) {
    this.#t = start;
  }
  /** The current manual time. */
  now(): number {
    return this.#t;
  }
  /** Moves time forward by `ms`. */
  advance(ms: number): void {
    this.#t += ms;
  }
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

/** Resolves after `ms`, or rejects with the signal's reason once `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Resolves after `ms`, when `signal` aborts, or when the returned `wake` is called, whichever
 * comes first; never rejects. For background loops.
 */
export function pause(ms: number, signal: AbortSignal): { done: Promise<void>; wake: () => void } {
  let wake = () => {};
  const done = new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal.removeEventListener("abort", finish);
      resolve();
    }
    wake = finish;
    signal.addEventListener("abort", finish, { once: true });
  });
  return { done, wake };
}
