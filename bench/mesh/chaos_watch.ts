/**
 * What the routers believe, as the pollers report it: the latest `/mesh/status` answer of each
 * router (observer), listeners called on every answer, and `until`, which waits for a condition
 * on those answers instead of sleeping. Fed by `Cluster` from the pollers' JSON lines.
 */

import type { PollLine } from "./chaos_poll.ts";

/** One answer of one router. */
export interface Observation extends PollLine {
  /** The router that answered (or failed to). */
  observer: string;
}

/** Status of `member` in `o`, or undefined if `o` failed or does not list it. */
export function statusIn(o: Observation | undefined, member: string): string | undefined {
  return o?.ok ? o.m?.[member]?.[0] : undefined;
}

/** Whether `o` came after `since` and lists exactly `names`, all ALIVE. */
export function allAlive(o: Observation | undefined, names: string[], since: number): boolean {
  if (!o?.ok || o.t <= since || !o.m) return false;
  return Object.keys(o.m).length === names.length &&
    names.every((n) => statusIn(o, n) === "ALIVE");
}

interface Waiter {
  pred: () => boolean;
  resolve: (t: number) => void;
}

/** Latest answers per router, with listeners and waits. */
export class Watcher {
  readonly #latest = new Map<string, Observation>();
  readonly #listeners = new Set<(o: Observation) => void>();
  readonly #waiters = new Set<Waiter>();

  /** Records an answer and tells listeners and waiters. */
  push(o: Observation): void {
    this.#latest.set(o.observer, o);
    for (const l of this.#listeners) l(o);
    for (const w of [...this.#waiters]) {
      if (!w.pred()) continue;
      this.#waiters.delete(w);
      w.resolve(o.t);
    }
  }

  /** The latest answer of `observer`. */
  latest(observer: string): Observation | undefined {
    return this.#latest.get(observer);
  }

  /** Calls `fn` on every answer until the returned function is called. */
  listen(fn: (o: Observation) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /**
   * Resolves with the time of the answer after which `pred` holds (now, if it holds already);
   * rejects after `limitMs` with `what` in the message.
   */
  until(pred: () => boolean, limitMs: number, what: string): Promise<number> {
    if (pred()) return Promise.resolve(Date.now());
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        pred,
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(w);
        reject(new Error(`${what}: not within ${limitMs} ms`));
      }, limitMs);
      this.#waiters.add(w);
    });
  }
}
