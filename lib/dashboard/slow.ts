/**
 * The status page's recent slow requests (with `--enable-trace`): the slowest sampled inference
 * requests of the last five minutes (those whose spans the tracing backend has), at most ten,
 * each with its trace id to look it up there. Kept in a small array sorted slowest first; a request joins it only when it is
 * slower than its last entry or there is room, so the common request costs one comparison.
 */

/** An inference request whose trace ended, as the page lists it. */
export interface TracedRequest {
  /** Its trace id. */
  traceId: string;
  /** Its request id. */
  requestId: string;
  /** `POST /v1/chat/completions`. */
  route: string;
  /** Status answered. */
  status: number;
  /** Time from arrival to the response's end, ms. */
  ms: number;
}

/** How long a slow request stays listed. */
export const SLOW_WINDOW_MS = 5 * 60_000;
/** How many are listed. */
export const SLOW_KEPT = 10;

/** A listed request and when its response ended (clock ms). */
interface Entry extends TracedRequest {
  at: number;
}

/** The slowest recent requests. */
export class SlowRequests {
  #list: Entry[] = [];

  /** Whether a request that took `ms`, ending at `now`, would be listed (then `add` it). */
  wouldKeep(ms: number, now: number): boolean {
    const l = this.#list;
    return l.length < SLOW_KEPT || ms > l[l.length - 1].ms ||
      now - l[l.length - 1].at > SLOW_WINDOW_MS;
  }

  /** Counts `t`, ended at `now`. */
  add(t: TracedRequest, now: number): void {
    this.#expire(now);
    const l = this.#list;
    if (l.length >= SLOW_KEPT && t.ms <= l[l.length - 1].ms) return;
    let i = l.length;
    while (i > 0 && l[i - 1].ms < t.ms) i--;
    l.splice(i, 0, { ...t, at: now });
    if (l.length > SLOW_KEPT) l.pop();
  }

  /** The list at `now`, slowest first. */
  list(now: number): readonly Entry[] {
    this.#expire(now);
    return this.#list;
  }

  #expire(now: number): void {
    if (this.#list.some((e) => now - e.at > SLOW_WINDOW_MS)) {
      this.#list = this.#list.filter((e) => now - e.at <= SLOW_WINDOW_MS);
    }
  }
}
