/**
 * A cancellation source cheaper than `AbortController`, one per client request: the client
 * leaving or the deadline fires it, and the worker calls hooked on it close.
 */

/**
 * A cancellation source, one per client request: lighter than an `AbortController` (no event
 * machinery), and what the proxy hands the client so that a client that leaves, or a deadline,
 * closes the worker connection. Hooks run once, in order, when it fires.
 */
export class Cancel {
  /** Whether it fired. */
  aborted = false;
  /** Why (set when it fires). */
  reason: unknown = undefined;
  #hooks: (() => void)[] | null = null;

  /** Runs `fn` when it fires (at once if it already has). */
  on(fn: () => void): void {
    if (this.aborted) fn();
    else (this.#hooks ??= []).push(fn);
  }

  /** Forgets a hook. */
  off(fn: () => void): void {
    const h = this.#hooks;
    if (!h) return;
    const i = h.indexOf(fn);
    if (i >= 0) h.splice(i, 1);
  }

  /** Fires with `reason` (only the first call counts). */
  cancel(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const h = this.#hooks;
    this.#hooks = null;
    if (h) { for (const fn of h) fn(); }
  }

  /** An `AbortSignal` that follows this one (for `fetch` and `Deno.connect`). */
  signal(): AbortSignal {
    const ac = new AbortController();
    this.on(() => ac.abort(this.reason));
    return ac.signal;
  }
}
