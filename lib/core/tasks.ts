/**
 * Background work that outlives the call that started it (a PD prefill drained after the client
 * got its answer), owned by whoever holds the `Tasks`: each task is stoppable, and `close()`
 * stops what is left and waits until every task has settled, so shutdown loses nothing silently
 * and leaves no promise running.
 */

/** A set of running background tasks. */
export class Tasks {
  readonly #running = new Map<Promise<void>, () => void>();
  #closed = false;

  /** Tasks still running. */
  get size(): number {
    return this.#running.size;
  }

  /**
   * Tracks `task` until it settles; `stop` ends it early (at `close`). After `close`, the task
   * is stopped at once (it is still awaited by nobody: it must settle on its own once stopped).
   */
  add(task: Promise<void>, stop: () => void): void {
    if (this.#closed) {
      stop();
      return;
    }
    const settled = task.then(
      () => {},
      () => {},
    ).finally(() => this.#running.delete(settled));
    this.#running.set(settled, stop);
  }

  /** Stops every task still running and resolves once all have settled. */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#running];
    for (const [, stop] of all) stop();
    await Promise.all(all.map(([p]) => p));
  }
}
