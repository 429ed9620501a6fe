/**
 * One worker's KV-event stream over a source that resumes from a cursor: sglang's
 * `SubscribeKvEvents` (the gateway's gRPC workers). In: `open(cursor)`, a stream of decoded
 * batches from after `cursor` (the last batch applied; 0: none, live only); out: batches in
 * sequence order and status changes, through a `KvEventSink`.
 *
 * The server replays what it still holds after the cursor, so every recovery is a fresh
 * subscription from the last applied number: a batch past the next number (a gap) ends the
 * stream and resubscribes; if the first batch after that still skips ahead, what it skipped is
 * gone (`gap_unrecoverable`). A first batch at or below the cursor means a new publisher
 * (`publisher_restarted`: the engine restarted, its numbers start again). A stream that ends or
 * fails is reopened with doubling delays on the injected clock. `close()` stops it and resolves
 * once the loop has ended.
 */

import { type Clock, sleep } from "../core/clock.ts";
import type { KvEventBatch } from "./events.ts";
import { classifySeq, reconnectDelay } from "./sequence.ts";
import type { KvEventSink, KvStreamStatus } from "./sink.ts";

/** An open subscription: its batches in order; `next` resolves null when it ended. */
export interface CursorSource {
  /** The next batch; null at the end; rejects when the stream fails. */
  next(): Promise<KvEventBatch | null>;
  /** Ends the subscription. */
  cancel(): void;
}

/** Options of a `CursorSubscriber`. */
export interface CursorSubscriberOptions {
  /** Opens a subscription from `cursor`; may throw (counted as a failed connection). */
  open: (cursor: number) => CursorSource;
  /** Names the stream in statuses (the worker's URL). */
  endpoint: string;
  /** First reopening delay in ms, doubling per failed try (default 100). */
  reconnectInitialMs?: number;
  /** Longest reopening delay in ms (default 30000). */
  reconnectMaxMs?: number;
  /** Clock of the delays. */
  clock: Clock;
}

/** Subscribes to one worker's KV events until closed; see the module comment. */
export class CursorSubscriber {
  readonly #o: Required<CursorSubscriberOptions>;
  readonly #sink: KvEventSink;
  readonly #abort = new AbortController();
  #source: CursorSource | null = null;
  #loop: Promise<void> | null = null;
  #lastSeq: number | null = null;

  constructor(o: CursorSubscriberOptions, sink: KvEventSink) {
    this.#o = {
      reconnectInitialMs: 100,
      reconnectMaxMs: 30_000,
      ...o,
    };
    this.#sink = sink;
  }

  /** The last applied sequence number; null before the first batch. */
  get lastSeq(): number | null {
    return this.#lastSeq;
  }

  /** Starts the loop (once). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Stops the loop and resolves once it has ended. */
  async close(): Promise<void> {
    this.#abort.abort();
    this.#source?.cancel();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const o = this.#o;
    const signal = this.#abort.signal;
    let failures = 0;
    let resumed = false; // the previous stream ended on a gap: the next first batch must fill it
    while (!signal.aborted) {
      const cursor = this.#lastSeq ?? 0;
      let source: CursorSource;
      try {
        source = this.#source = o.open(cursor);
      } catch (e) {
        const retryInMs = reconnectDelay(failures++, o.reconnectInitialMs, o.reconnectMaxMs);
        this.#status({ kind: "connect_failed", endpoint: o.endpoint, reason: text(e), retryInMs });
        await this.#pause(retryInMs);
        continue;
      }
      let first = true;
      let reason = "the stream ended";
      try {
        for (let b = await source.next(); b !== null; b = await source.next()) {
          if (first) {
            first = false;
            failures = 0;
            this.#status({ kind: "connected", endpoint: o.endpoint });
          }
          const last = this.#lastSeq;
          const step = classifySeq(last, b.seq);
          if (step === "restart" || (resumed && step === "gap")) {
            if (step === "restart") {
              this.#status({ kind: "publisher_restarted", lastSeq: last!, seq: b.seq });
            } else {
              const missing = b.seq - last! - 1;
              const reason = "the worker no longer holds them";
              this.#status({
                kind: "gap_unrecoverable",
                from: last! + 1,
                to: b.seq - 1,
                missing,
                reason,
              });
            }
          } else if (step === "gap") {
            // Resubscribe from the last applied batch: the worker replays what it still holds.
            resumed = true;
            reason = `a gap after batch ${last}`;
            break;
          } else if (resumed && step === "next" && last !== null) {
            this.#status({ kind: "gap_recovered", from: last + 1, to: b.seq });
          }
          resumed = false;
          this.#lastSeq = b.seq;
          try {
            this.#sink.onBatch(b);
          } catch { /* the consumer's fault, not the stream's: keep going */ }
        }
      } catch (e) {
        reason = text(e);
      } finally {
        source.cancel();
        this.#source = null;
      }
      if (signal.aborted) break;
      if (resumed) continue; // reopen at once to fill the gap
      const retryInMs = reconnectDelay(failures++, o.reconnectInitialMs, o.reconnectMaxMs);
      this.#status({ kind: "disconnected", endpoint: o.endpoint, reason, retryInMs });
      await this.#pause(retryInMs);
    }
  }

  #status(s: KvStreamStatus): void {
    if (this.#abort.signal.aborted) return;
    try {
      this.#sink.onStatus(s);
    } catch { /* the consumer's fault, not the stream's */ }
  }

  /** Waits `ms` on the clock, or until closed. */
  async #pause(ms: number): Promise<void> {
    await sleep(this.#o.clock, ms, this.#abort.signal).catch(() => {});
  }
}

function text(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
