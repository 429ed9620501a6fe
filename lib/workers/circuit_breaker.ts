/**
 * Per-worker circuit breaker: closed → open after N consecutive failures, open → half-open once
 * the open timeout has passed (checked lazily), half-open → closed after M consecutive
 * successes, any half-open failure reopens. Time comes in as `now` (ms).
 *
 * Beyond upstream, which accepts the window setting but ignores it: failures further apart than
 * the window do not add up, so a worker that fails once an hour never opens.
 */

/** Breaker states, exported as gauge values 0, 1, 2. */
export type BreakerState = "closed" | "open" | "half_open";

/** What one attempt meant for the worker's health. */
export type Outcome = "success" | "failure" | "neutral";

/** Gauge encoding of a state, as SMG exports it. */
export const BREAKER_GAUGE: Record<BreakerState, number> = { closed: 0, open: 1, half_open: 2 };

/** Breaker tuning, in milliseconds. */
export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  failureThreshold: number;
  /** Consecutive half-open successes that close it. */
  successThreshold: number;
  /** Time open before half-open. */
  openMs: number;
  /** Failures further apart than this restart the count. */
  windowMs: number;
  /** Never open; outcomes are still counted. */
  disabled: boolean;
}

/** One worker's breaker. */
export class CircuitBreaker {
  readonly #o: BreakerOptions;
  readonly #onTransition?: (from: BreakerState, to: BreakerState) => void;
  #state: BreakerState = "closed";
  #failures = 0;
  #successes = 0;
  #lastFailureAt = -Infinity;
  #openedAt = 0;

  /** A closed breaker; `onTransition` hears every state change. */
  constructor(o: BreakerOptions, onTransition?: (from: BreakerState, to: BreakerState) => void) {
    this.#o = o;
    this.#onTransition = onTransition;
  }

  /** The state at `now`, moving open → half-open when the open time is over. */
  state(now: number): BreakerState {
    if (this.#state === "open" && now - this.#openedAt >= this.#o.openMs) {
      this.#move("half_open");
    }
    return this.#state;
  }

  /** Whether a request may go to the worker at `now`. */
  allows(now: number): boolean {
    return this.state(now) !== "open";
  }

  /** Consecutive failures counted so far. */
  get consecutiveFailures(): number {
    return this.#failures;
  }

  /** Consecutive successes counted so far. */
  get consecutiveSuccesses(): number {
    return this.#successes;
  }

  /** Records one attempt's outcome at `now`. */
  record(outcome: Outcome, now: number): void {
    if (outcome === "neutral") return;
    const state = this.state(now);
    if (outcome === "success") {
      this.#failures = 0;
      this.#successes++;
      if (state === "half_open" && this.#successes >= this.#o.successThreshold) {
        this.#move("closed");
      }
      return;
    }
    this.#successes = 0;
    if (now - this.#lastFailureAt > this.#o.windowMs) this.#failures = 0;
    this.#lastFailureAt = now;
    this.#failures++;
    if (this.#o.disabled) return;
    if (
      state === "half_open" || (state === "closed" && this.#failures >= this.#o.failureThreshold)
    ) {
      this.#openedAt = now;
      this.#move("open");
    }
  }

  #move(to: BreakerState): void {
    const from = this.#state;
    if (from === to) return;
    this.#state = to;
    if (to !== "closed") this.#successes = 0;
    if (to === "closed") this.#failures = 0;
    this.#onTransition?.(from, to);
  }
}
