/**
 * Waiting in tests without sleeping: on an event (`until`, `Waiters`, `within`, `timerSet`),
 * each bounded by a timeout that fails the test with what it waited for instead of hanging it;
 * and, only where the answer lives in another process with no event to hear, one shared poll
 * (`poll`), the one fixed wait here.
 */

import type { FakeClock } from "../lib/core/clock.ts";

/** Rejects naming `what` if `p` has not settled within `ms` (default 10 s). */
export function within<T>(p: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Adds a listener; returns its removal (the shape of `WorkerRegistry.subscribe`). */
export type Subscribe = (listener: () => void) => () => void;

/** Conditions that are checked whenever `poke()` says something changed. */
export class Waiters {
  #waiting: { cond: () => boolean; resolve: () => void }[] = [];

  /** Something changed: resolves every wait whose condition now holds. */
  readonly poke = (): void => {
    this.#waiting = this.#waiting.filter((w) => (w.cond() ? (w.resolve(), false) : true));
  };

  /** Resolves once `cond()` holds, now or at a later `poke()`; fails after `ms` (default 10 s). */
  wait(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
    if (cond()) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    const w = { cond, resolve };
    this.#waiting.push(w);
    return within(promise, what, ms).finally(() => {
      this.#waiting = this.#waiting.filter((x) => x !== w);
    });
  }
}

/** Resolves once `cond()` holds, checked now and after each event of `subscribe` (bounded). */
export async function until(
  cond: () => boolean,
  subscribe: Subscribe,
  what: string,
  ms = 10_000,
): Promise<void> {
  const waiters = new Waiters();
  const off = subscribe(waiters.poke);
  try {
    await waiters.wait(cond, what, ms);
  } finally {
    off();
  }
}

/**
 * Resolves once `clock` has `n` timers pending (default 1), checked at each timer set: a loop on
 * the clock has gone to sleep, so advancing the clock now wakes it.
 */
export function timerSet(clock: FakeClock, what: string, n = 1): Promise<void> {
  return until(() => clock.pending >= n, (l) => clock.subscribe(l), what);
}

/**
 * Checks `check` every `everyMs` until it holds, failing after `ms`. A fixed wait, for what
 * only another process can tell (a daemon's port, Prometheus's API), with no event to wait on.
 */
export async function poll(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 30_000,
  everyMs = 20,
): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (await Promise.resolve().then(check).catch(() => false)) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}
