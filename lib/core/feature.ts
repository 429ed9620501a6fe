/**
 * An optional part of the gateway as a value: built by its own folder from its slice of the
 * config and the services it is handed, then started, refreshed before each scrape, reloaded on
 * SIGHUP and stopped by the composition root (`lib/server/app.ts`), which holds the features in one list in
 * dependency order: started first to last, stopped last to first. Nothing else about a feature
 * is the root's business.
 */

/** One optional part of the gateway. */
export interface Feature {
  /** Its name in the feature list and the logs. */
  readonly name: string;
  /**
   * Starts its loops and subscriptions; the promise settles once it serves (or has failed
   * softly, as its own state tells). Loops end when `signal` aborts.
   */
  start?(signal: AbortSignal): Promise<void> | void;
  /** Stops; settles once everything it started has ended. */
  stop?(): Promise<void>;
  /** Sets its gauges just before a scrape renders the metrics. */
  gauges?(): void;
  /**
   * Reads its files again (certificates: SIGHUP reaches every feature that has this); never
   * rejects, a bad file is logged and what is in use kept.
   */
  reload?(reason: string): Promise<unknown>;
}

/** A loop that runs until its signal aborts (health probes, load polls, history samples). */
export interface Loop {
  /** Runs until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}

/** `loop` as a feature: started with the gateway's signal, stopped once it has returned. */
export function loopFeature(name: string, loop: Loop): Feature {
  let task: Promise<void> = Promise.resolve();
  return {
    name,
    start(signal) {
      task = loop.run(signal);
    },
    stop: () => task,
  };
}
