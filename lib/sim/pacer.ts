/**
 * Paces the simulated engine in wall time and keeps its simulated clock.
 *
 * This is where `timeScale` applies: the engine thinks in simulated ms only, and each step of
 * `simMs` owes `simMs × timeScale` wall ms. The debt is settled against the wall clock actually
 * elapsed (step work, sleeps and their overshoot), and the engine sleeps only once at least
 * `MIN_SLEEP_MS` is owed, because timers cannot sleep less than about a millisecond: at
 * `timeScale` 0.01 a 6 ms decode step owes 0.06 ms and about 16 steps run per sleep. Oversleeping
 * leaves a credit (down to `DEBT_FLOOR_MS`) that later steps use up, so the average pace stays
 * true without busy-waiting. When steps owe too little to sleep (`timeScale` 0), the pacer still
 * yields to the event loop every `YIELD_EVERY_MS` of wall time or `YIELD_EVERY_STEPS` steps so
 * sockets keep flowing.
 *
 * `now` and `sleep` are injected: production passes `performance.now` and a timer sleep; tests
 * pass a virtual clock whose sleep just advances it, so a run takes no real time.
 */

/** What the pacer needs from the outside world, all in wall milliseconds. */
export interface PacerDeps {
  /** Wall (or virtual) time in ms; only differences matter. */
  now: () => number;
  /** Resolves after `ms` wall ms; may reject once `signal` aborts. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** The smallest wall sleep the pacer asks for; less is carried as debt. */
export const MIN_SLEEP_MS = 1;
/** How much oversleep (negative debt) later steps may make up. */
export const DEBT_FLOOR_MS = -10;
/** Longest wall time between yields to the event loop. */
export const YIELD_EVERY_MS = 5;
/** Most steps between yields to the event loop. */
export const YIELD_EVERY_STEPS = 256;

/** Converts simulated step durations into wall sleeps and tracks simulated time. */
export class Pacer {
  /** Wall ms per simulated ms. */
  readonly timeScale: number;
  #deps: PacerDeps;
  #sim = 0;
  #debt = 0;
  /** Wall time up to which the debt is settled. */
  #mark: number;
  #lastYield: number;
  #steps = 0;
  #step: { simStart: number; simEnd: number; wallStart: number } | null = null;

  /** A pacer at simulated time 0. */
  constructor(timeScale: number, deps: PacerDeps) {
    this.timeScale = timeScale;
    this.#deps = deps;
    this.#mark = this.#lastYield = deps.now();
  }

  /** Simulated ms now; during a step, interpolated from wall time between its start and end. */
  simNow(): number {
    const s = this.#step;
    if (!s) return this.#sim;
    if (this.timeScale === 0) return s.simStart;
    return Math.min(s.simEnd, s.simStart + (this.#deps.now() - s.wallStart) / this.timeScale);
  }

  /** Forgets the wall time that passed while idle; call when work resumes. */
  resume(): void {
    this.#debt = 0;
    this.#steps = 0;
    this.#mark = this.#lastYield = this.#deps.now();
  }

  /** Runs one step of `simMs`: sleeps what is owed (or yields), then advances simulated time. */
  async step(simMs: number, signal?: AbortSignal): Promise<void> {
    const now = this.#deps.now();
    this.#step = { simStart: this.#sim, simEnd: this.#sim + simMs, wallStart: now };
    this.#debt = Math.max(DEBT_FLOOR_MS, this.#debt + simMs * this.timeScale - (now - this.#mark));
    this.#mark = now;
    this.#steps++;
    try {
      if (this.#debt >= MIN_SLEEP_MS) await this.#sleep(this.#debt, signal);
      else if (this.#steps >= YIELD_EVERY_STEPS || now - this.#lastYield >= YIELD_EVERY_MS) {
        await this.#sleep(0, signal);
      }
    } finally {
      this.#step = null;
      this.#sim += simMs;
    }
  }

  async #sleep(ms: number, signal?: AbortSignal): Promise<void> {
    await this.#deps.sleep(ms, signal);
    const now = this.#deps.now();
    this.#debt = Math.max(DEBT_FLOOR_MS, this.#debt - (now - this.#mark));
    this.#mark = this.#lastYield = now;
    this.#steps = 0;
  }
}
