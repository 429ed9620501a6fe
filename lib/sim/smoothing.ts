/**
 * Smoothed figures for the engine's load report: an event rate per second that decays in
 * continuous time between events (so a gap counts against the next reading, with no timer), and
 * an EWMA of per-request samples.
 */

/** An exponentially weighted moving average: `sample` itself when there is no previous value. */
export function ewma(previous: number | null, sample: number, alpha: number): number {
  return previous === null ? sample : previous + alpha * (sample - previous);
}

/**
 * Events per second, smoothed with time constant `tauMs`: each event adds 1/tau and the sum
 * decays by e^(-dt/tau), an unbiased estimate of a steady rate that needs no timer.
 */
export class RateMeter {
  /** Smoothing time constant in ms. */
  readonly tauMs: number;
  #rate = 0;
  #at: number | null = null;

  /** A meter reading zero; `tauMs` defaults to one second. */
  constructor(tauMs = 1000) {
    this.tauMs = tauMs;
  }

  /** Records `count` events at time `nowMs`. */
  add(count: number, nowMs: number): void {
    this.#rate = this.value(nowMs) + (count * 1000) / this.tauMs;
    this.#at = nowMs;
  }

  /**
   * The rate as of the last event (0 before any): what sglang's `gen_throughput` shows, which is
   * updated by decode steps and held while the engine idles.
   */
  last(): number {
    return this.#rate;
  }

  /** The smoothed rate per second at time `nowMs` (not before the last `add`). */
  value(nowMs: number): number {
    if (this.#at === null) return 0;
    return this.#rate * Math.exp(-Math.max(0, nowMs - this.#at) / this.tauMs);
  }
}
