/**
 * The simulated engine's KV event log, as sglang and vLLM publish theirs: the pool's block
 * events (`KvBlockEvent`) gathered while the engine runs synchronously (one scheduler step, one
 * flush) into one numbered batch, sequence numbers from 1 in this process (a restarted worker
 * starts again at 1), the last `keep` batches kept for replay. A subscriber gives the last batch
 * it applied (0: none) and gets what is kept after it, then every new batch, in order. The log
 * records nothing until its first subscriber (batches carry every stored block's tokens: an
 * engine nobody listens to keeps none).
 */

import type { KvBlockEvent } from "./kv_cache.ts";

/** One numbered batch. */
export interface KvBatch {
  /** Sequence number, from 1. */
  seq: number;
  /** When it was published (ms since the epoch). */
  ts: number;
  /** Its events, in the order they happened. */
  events: KvBlockEvent[];
}

/** A subscriber's callback. */
export type KvBatchListener = (batch: KvBatch) => void;

/** The log of one engine; see the module comment. */
export class KvEventLog {
  readonly #keep: number;
  readonly #kept: KvBatch[] = [];
  readonly #listeners = new Set<KvBatchListener>();
  #pending: KvBlockEvent[] = [];
  #seq = 0;
  #scheduled = false;
  #recording = false;

  /** Keeps the last `keep` batches for replay (default 256). */
  constructor(keep = 256) {
    this.#keep = keep;
  }

  /** The last sequence number published (0 before any). */
  get seq(): number {
    return this.#seq;
  }

  /** Adds an event to the batch being gathered; it is published once the engine yields. */
  add(e: KvBlockEvent): void {
    if (!this.#recording) return;
    this.#pending.push(e);
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => this.flush());
  }

  /** Publishes the events gathered so far as one batch (nothing when there are none). */
  flush(): void {
    this.#scheduled = false;
    if (this.#pending.length === 0) return;
    const batch: KvBatch = { seq: ++this.#seq, ts: Date.now(), events: this.#pending };
    this.#pending = [];
    this.#kept.push(batch);
    if (this.#kept.length > this.#keep) this.#kept.shift();
    for (const l of this.#listeners) l(batch);
  }

  /**
   * Calls `listener` with every kept batch after `cursor` (0: none), then with each new one;
   * returns its removal.
   */
  subscribe(cursor: number, listener: KvBatchListener): () => void {
    this.#recording = true;
    if (cursor > 0) { for (const b of this.#kept) if (b.seq > cursor) listener(b); }
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
