/**
 * KV-event mode's state: one `BlockIndex` per model, fed by one subscription per worker that
 * publishes events. In: workers attached with their model and a way to subscribe (a stream
 * started with a `KvEventSink`); out: each model's index (`index(model)`), what a policy reads.
 *
 * What a stream says is applied to the worker's model's index in order. A stored event that
 * cannot be chained (its parent was stored before the subscription began, or missed) is left
 * out and counted: the index then under-reports that worker, never over-reports it. A lost gap
 * makes the worker's entries unreliable, and a restarted publisher (an engine restart empties
 * its cache) makes them wrong: both drop them (`clearWorker`), to be rebuilt from what the
 * worker stores next. A worker detached (removed) leaves the index at once. `prune()` applies
 * the indexes' TTL and capacity bounds. Counts go to the `KvMonitorObserver`.
 *
 * A worker *reports* while its stream is connected: from its first `connected` status until a
 * `disconnected` or `connect_failed` one. While it does not, what it stores is not seen, so its
 * entries under-report it: `view(model).reports(worker)` says so, and the policy takes its own
 * records for that worker instead (when its events stop, the worker falls back to the tree).
 */

import type { Clock } from "../core/clock.ts";
import { BlockIndex, type StoreRefusal } from "./block_index.ts";
import type { KvEventSink, KvStreamStatus } from "./sink.ts";

/** A started subscription of one worker. */
export interface KvStream {
  /** Stops it; resolves once it has ended. */
  close(): Promise<void>;
}

/** Starts a worker's subscription feeding `sink`. */
export type StartStream = (sink: KvEventSink) => KvStream;

/** What the monitor reports (for metrics and logs). */
export interface KvMonitorObserver {
  /** A batch of `events` applied for `worker`. */
  batch?(worker: string, events: number): void;
  /** A stored event of `worker` left out: it could not be chained, or had another block size. */
  refused?(worker: string, reason: StoreRefusal): void;
  /** A status change of `worker`'s stream. */
  status?(worker: string, status: KvStreamStatus): void;
  /** `worker`'s entries were dropped because of `reason` (they will be rebuilt). */
  reset?(worker: string, reason: "gap" | "restart"): void;
}

/** Options of a `KvMonitor`. */
export interface KvMonitorOptions {
  /** Time of the indexes' pruning. */
  clock: Clock;
  /** Index TTL in ms; 0 off (`--kv-indexer-ttl-secs`). */
  ttlMs: number;
  /** Most keys per index; 0 off (`--kv-indexer-max-entries`). */
  maxEntries: number;
  /** Where counts go (default: nowhere). */
  observer?: KvMonitorObserver;
}

interface Attached {
  model: string;
  stream: KvStream;
  connected: boolean;
}

/** What a policy reads of a model's index: the blocks held, and whose account is current. */
export interface KvIndexView {
  /** Nothing held by any worker. */
  readonly empty: boolean;
  /** Each worker's leading tokens of `tokens` held; workers holding none are absent. */
  match(tokens: readonly number[]): ReadonlyMap<string, number>;
  /** Whether `worker`'s stream is connected (its account is current). */
  reports(worker: string): boolean;
}

/** The indexes and subscriptions of KV-event mode; see the module comment. */
export class KvMonitor {
  readonly #o: KvMonitorOptions;
  readonly #indexes = new Map<string, BlockIndex>();
  readonly #workers = new Map<string, Attached>();
  readonly #listeners = new Set<() => void>();
  readonly #views = new Map<string, KvIndexView>();

  constructor(o: KvMonitorOptions) {
    this.#o = o;
  }

  /** The index of `model`, or null when no worker of it publishes events. */
  index(model: string): BlockIndex | null {
    return this.#indexes.get(model) ?? null;
  }

  /** What a policy reads of `model`'s index, or null when no worker of it publishes events. */
  view(model: string): KvIndexView | null {
    const index = this.#indexes.get(model);
    if (!index) return null;
    let v = this.#views.get(model);
    if (!v) {
      const workers = this.#workers;
      v = {
        get empty() {
          return index.empty;
        },
        match: (tokens) => index.match(tokens),
        reports: (worker) => workers.get(worker)?.connected === true,
      };
      this.#views.set(model, v);
    }
    return v;
  }

  /** Calls `listener` after each batch or status applied; returns its removal. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Workers attached. */
  get size(): number {
    return this.#workers.size;
  }

  /** Whether `worker` is attached. */
  has(worker: string): boolean {
    return this.#workers.has(worker);
  }

  /** Subscribes to `worker`'s events (it serves `model`); a worker already attached is kept. */
  attach(worker: string, model: string, start: StartStream): void {
    if (this.#workers.has(worker)) return;
    let index = this.#indexes.get(model);
    if (!index) {
      const o = this.#o;
      index = new BlockIndex({ clock: o.clock, ttlMs: o.ttlMs, maxEntries: o.maxEntries });
      this.#indexes.set(model, index);
    }
    const idx = index;
    const observer = this.#o.observer;
    const reset = (reason: "gap" | "restart") => {
      idx.clearWorker(worker);
      observer?.reset?.(worker, reason);
    };
    const sink: KvEventSink = {
      onBatch: (b) => {
        for (const e of b.events) {
          const refused = idx.apply(worker, e);
          if (refused !== null) observer?.refused?.(worker, refused);
        }
        observer?.batch?.(worker, b.events.length);
        for (const l of this.#listeners) l();
      },
      onStatus: (s) => {
        observer?.status?.(worker, s);
        const a = this.#workers.get(worker);
        if (a && s.kind === "connected") a.connected = true;
        else if (a && (s.kind === "disconnected" || s.kind === "connect_failed")) {
          a.connected = false;
        }
        if (s.kind === "publisher_restarted") reset("restart");
        else if (s.kind === "gap_unrecoverable") reset("gap");
        for (const l of this.#listeners) l();
      },
    };
    const attached: Attached = { model, stream: null!, connected: false };
    this.#workers.set(worker, attached);
    attached.stream = start(sink);
  }

  /** Stops `worker`'s subscription and drops its entries. */
  async detach(worker: string): Promise<void> {
    const a = this.#workers.get(worker);
    if (!a) return;
    this.#workers.delete(worker);
    this.#indexes.get(a.model)?.clearWorker(worker);
    await a.stream.close();
  }

  /** Prunes every index by its TTL and capacity; returns the keys dropped. */
  prune(): number {
    let n = 0;
    for (const index of this.#indexes.values()) n += index.prune();
    return n;
  }

  /** Stops every subscription; resolves once all have ended. */
  async close(): Promise<void> {
    const all = [...this.#workers.keys()];
    await Promise.all(all.map((w) => this.detach(w)));
  }
}
