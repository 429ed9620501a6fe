/**
 * Whether a worker is making progress, as its answers show it: the last time any of its attempts
 * received something (a response head, a stream's piece, a whole answer's end), and, once one of
 * its attempts missed a progress deadline (`--stream-head-timeout-secs`,
 * `--stream-idle-timeout-secs`), until when it gets no new requests. The exclusion ends at the
 * worker's next progress (a piece on a stream it still holds) or, with nothing left to show it
 * on, after one idle deadline, when one request may try it again (a miss excludes it again).
 *
 * A plain record the request path writes once per piece: no timer, no allocation.
 */

/** One worker's progress and stall exclusion (times in clock ms). */
export class WorkerProgress {
  /** When any of its attempts last received something; -Infinity: never. */
  lastAt = -Infinity;
  /** No new requests before this time, unless it shows progress first. */
  #stalledUntil = -Infinity;
  /** When the current exclusion began (for `stalled_for_ms`). */
  #stalledAt = -Infinity;

  /** Something arrived from the worker at `now`: any exclusion ends. */
  saw(now: number): void {
    this.lastAt = now;
    this.#stalledUntil = -Infinity;
  }

  /** An attempt missed a progress deadline at `now`: no new requests for `forMs`. */
  stall(now: number, forMs: number): void {
    if (now >= this.#stalledUntil) this.#stalledAt = now;
    this.#stalledUntil = now + forMs;
  }

  /** Whether the worker is excluded at `now`. */
  stalled(now: number): boolean {
    return now < this.#stalledUntil;
  }

  /** Whether it received something within `ms` before `now`. */
  recent(now: number, ms: number): boolean {
    return now - this.lastAt < ms;
  }

  /** When the current exclusion began, or null when there is none at `now`. */
  stalledSince(now: number): number | null {
    return this.stalled(now) ? this.#stalledAt : null;
  }
}
