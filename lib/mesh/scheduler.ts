/**
 * Time for the mesh shells: a clock and one-shot timers behind one interface, with the real one
 * (performance.now and setTimeout) and a fake one that only moves when a test says so, so a
 * cluster of hundreds of routers runs minutes of protocol in milliseconds, deterministically.
 */

/** Clock and timers. */
export interface Scheduler {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Runs `fn` after `ms`; the returned function cancels it. */
  after(ms: number, fn: () => void): () => void;
}

/** Real time. */
export const systemScheduler: Scheduler = {
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

/** Fake time: timers run, in order, only inside `advance`. */
export class FakeScheduler implements Scheduler {
  #now: number;
  #heap: Timer[] = [];
  #order = 0;

  /** Starts at `start` ms (default 0). */
  constructor(start = 0) {
    this.#now = start;
  }

  /** The fake time. */
  now(): number {
    return this.#now;
  }

  /** Schedules `fn` at now + ms. */
  after(ms: number, fn: () => void): () => void {
    const t: Timer = {
      at: this.#now + Math.max(0, ms),
      order: this.#order++,
      fn,
      cancelled: false,
    };
    this.#push(t);
    return () => (t.cancelled = true);
  }

  /** Timers not yet run or cancelled. */
  get pending(): number {
    return this.#heap.filter((t) => !t.cancelled).length;
  }

  /** Moves time forward by `ms`, running every timer that falls due, in time order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const t = this.#heap[0];
      if (!t || t.at > end) break;
      this.#pop();
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

  #less(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.order < b.order);
  }

  #push(t: Timer): void {
    const h = this.#heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.#less(h[l], h[m])) m = l;
      if (r < h.length && this.#less(h[r], h[m])) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m], h[i]];
      i = m;
    }
  }
}
