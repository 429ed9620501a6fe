/**
 * Whether a worker is making progress, as its answers show it: the last time any of its attempts
 * received something (a response head, a stream's piece, a whole answer's end), and, once one of
 * its attempts missed a progress deadline (`--stream-head-timeout-secs`,
 * `--stream-idle-timeout-secs`), until when it gets no new requests while another worker can take
 * them (`selectWorker` falls back on it rather than refuse a request). The exclusion ends at the
 * worker's next progress (a piece on a stream it still holds) or, with nothing left to show it
 * on, after one idle deadline, when one request may try it again (a miss excludes it again).
 *
 * Sooner than any stream's deadline, a worker is left out while the gateway waits on it for a
 * stream's next piece and nothing has come from it for `WEDGE_MS` (as SMG's liveness check
 * excludes a wedged worker in 2-3 s): a decoding batch gives every sequence a token each step
 * (10-50 ms), so a worker silent on all its streams that long is stuck or paused, and new
 * requests would only queue behind it. Its streams keep their own deadline
 * (`--stream-idle-timeout-secs`); the exclusion ends with its next piece.
 *
 * A plain record the request path writes once per piece: no timer, no allocation.
 */

/** A worker silent this long while the gateway waits on it mid-stream gets no new requests. */
export const WEDGE_MS = 3000;

/** One worker's progress and stall exclusion (times in clock ms). */
export class WorkerProgress {
  /** When any of its attempts last received something; -Infinity: never. */
  lastAt = -Infinity;
  /** No new requests before this time, unless it shows progress first. */
  #stalledUntil = -Infinity;
  /** When the current exclusion began (for `stalled_for_ms`). */
  #stalledAt = -Infinity;
  /** Reads of its streams (past their first piece) waiting on it now. */
  waiting = 0;
  /** When `waiting` last went from 0 to 1 (clock ms). */
  #waitFrom = -Infinity;

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

  /** A read of one of its streams starts (`on`) or ends, at `now()` (read only on 0 → 1). */
  wait(on: boolean, now: () => number): void {
    if (!on) this.waiting--;
    else if (this.waiting++ === 0) this.#waitFrom = now();
  }

  /** Whether it is waited on mid-stream and has sent nothing for `WEDGE_MS`, at `now`. */
  #wedged(now: number): boolean {
    return this.waiting > 0 && now - Math.max(this.lastAt, this.#waitFrom) >= WEDGE_MS;
  }

  /** Whether the worker is excluded at `now`. */
  stalled(now: number): boolean {
    return now < this.#stalledUntil || this.#wedged(now);
  }

  /** Whether it received something within `ms` before `now`. */
  recent(now: number, ms: number): boolean {
    return now - this.lastAt < ms;
  }

  /** When the current exclusion began, or null when there is none at `now`. */
  stalledSince(now: number): number | null {
    if (now < this.#stalledUntil) return this.#stalledAt;
    return this.#wedged(now) ? Math.max(this.lastAt, this.#waitFrom) + WEDGE_MS : null;
  }
}
