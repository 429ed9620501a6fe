/**
 * The status page's recent slow requests (with `--enable-trace`): the slowest traced inference
 * requests of the last five minutes, at most ten, each with its trace id to look up in the
 * tracing backend. Kept in a small array sorted slowest first; a request joins it only when it is
 * slower than its last entry or there is room, so the common request costs one comparison.
 */

/** An inference request whose trace ended, as the page lists it. */
export interface TracedRequest {
  /** Its trace id. */
  traceId: string;
  /** Whether its spans were recorded (sampled). */
  sampled: boolean;
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
