/**
 * KV-event mode wired into the gateway (`--kv-events auto`): which workers are subscribed, over
 * what, and where their events go. A gRPC worker is subscribed through sglang's
 * `SubscribeKvEvents` (`CursorSubscriber`), an HTTP worker labelled `kv_events` (its engine's
 * ZMQ PUB endpoint, `tcp://host:port`; `kv_events_replay` its replay endpoint) through
 * `ZmqSubscriber`, once its model is known; a removed worker is detached. The events feed a
 * `KvMonitor`'s per-model indexes (`createKvIndexes`), which cache_aware reads
 * (`PolicyDeps.cacheIndex`). Counts go to
 * SMG's `smg_kv_event_subscription_failures_total` and ours. The indexes are pruned every 30 s.
 *
 * Only models routed by cache_aware are subscribed (no other policy reads the index).
 */

import type { GatewayConfig } from "../config/config.ts";
import { type Clock, every } from "../core/clock.ts";
import type { Feature } from "../core/feature.ts";
import type { Logger } from "../core/log.ts";
import type { KvEventBatchPb } from "../grpc/sglang_proto.ts";
import type { KvEvent, KvEventBatch } from "./events.ts";
import {
  type CursorSource,
  CursorSubscriber,
  KvMonitor,
  type StartStream,
  ZmqSubscriber,
} from "./mod.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { Worker } from "../workers/worker.ts";
import type { GrpcWorkers } from "../proxy/grpc/workers.ts";

/** How often the indexes' TTL and capacity are applied. */
const PRUNE_MS = 30_000;

/** What the per-model indexes are built from. */
export interface KvIndexDeps {
  config: GatewayConfig;
  metrics: Metrics;
  log: Logger;
  clock: Clock;
}

/**
 * The per-model indexes of `--kv-events auto`, counted into the metrics. Built before the
 * policies (cache_aware reads them, `PolicyDeps.cacheIndex`); `KvEvents` fills them.
 */
export function createKvIndexes(d: KvIndexDeps): KvMonitor {
  const m = d.metrics;
  return new KvMonitor({
    clock: d.clock,
    ttlMs: d.config.cacheAware.kvIndexerTtlSecs * 1000,
    maxEntries: d.config.cacheAware.kvIndexerMaxEntries,
    observer: {
      batch: (w) => m.kvBatches.with(w).inc(),
      refused: (w, reason) => m.kvFailures.with(w, reason).inc(),
      reset: (w, reason) => {
        m.kvFailures.with(w, reason === "gap" ? "gap_unrecoverable" : "publisher_restarted")
          .inc();
        d.log.warn("KV-event index reset for a worker", { worker: w, reason });
      },
      status: (w, s) => {
        if (
          s.kind === "connect_failed" || s.kind === "disconnected" || s.kind === "bad_message"
        ) {
          m.kvFailures.with(w, s.kind).inc();
        }
      },
    },
  });
}

/** What KV-event mode is built from. */
export interface KvSetupDeps extends KvIndexDeps {
  /** The indexes to fill (`createKvIndexes`). */
  monitor: KvMonitor;
  registry: WorkerRegistry;
  /**
   * gRPC workers' clients and the gateway's tokenizer (`--model-path`): null without them, and
   * then no worker is subscribed (events are matched to requests by their token ids).
   */
  grpc: GrpcWorkers | null;
  /** Whether `model` is routed by cache_aware. */
  cacheAware: (model: string) => boolean;
}

/** KV-event mode as a feature: the registry subscription that feeds the indexes. */
export class KvEvents implements Feature {
  readonly name = "kv_events";
  /** The per-model indexes. */
  readonly monitor: KvMonitor;
  readonly #d: KvSetupDeps;
  #off: (() => void) | null = null;
  #stopPrune: (() => void) | null = null;

  constructor(d: KvSetupDeps) {
    this.#d = d;
    this.monitor = d.monitor;
  }

  /** Subscribes to the registry's workers (those there now, and those to come). */
  start(): void {
    const r = this.#d.registry;
    for (const w of r.all()) this.#consider(w);
    this.#off = r.subscribe((e) => {
      if (e.kind === "removed") void this.monitor.detach(e.worker.url);
      else if (e.kind === "added" || e.kind === "models") this.#consider(e.worker);
    });
    this.#stopPrune = every(this.#d.clock, PRUNE_MS, () => this.#prune());
  }

  /** Stops every subscription; resolves once they have ended. */
  async stop(): Promise<void> {
    this.#off?.();
    this.#stopPrune?.();
    await this.monitor.close();
  }

  /** Whether `model`'s index holds anything (its requests are then worth tokenizing). */
  routesOnTokens(model: string): boolean {
    const index = this.monitor.index(model);
    return index !== null && !index.empty;
  }

  /** Sets the index gauges (at each scrape). */
  gauges(): void {
    this.#d.metrics.kvIndexBlocks.reset();
    for (const model of this.#d.registry.models()) {
      const index = this.monitor.index(model);
      if (index) this.#d.metrics.kvIndexBlocks.with(model).set(index.size);
    }
  }

  #prune(): void {
    const n = this.monitor.prune();
    if (n > 0) this.#d.log.debug("KV-event indexes pruned", { keys: n });
  }

  /** Subscribes `w` if it publishes events and its model is routed by cache_aware. */
  #consider(w: Worker): void {
    const model = w.models?.[0];
    if (model === undefined || this.monitor.has(w.url) || !this.#d.cacheAware(model)) return;
    const start = this.#starter(w);
    if (start) this.monitor.attach(w.url, model, start);
  }

  /** How to subscribe to `w`'s events, or null when it publishes none the gateway can read. */
  #starter(w: Worker): StartStream | null {
    const clock = this.#d.clock;
    if (w.connection === "grpc") {
      const grpc = this.#d.grpc;
      if (!grpc) return null;
      return (sink) => {
        const open = (cursor: number) => grpcSource(grpc, w.url, cursor);
        const sub = new CursorSubscriber({ endpoint: w.url, open, clock }, sink);
        sub.start();
        return sub;
      };
    }
    const endpoint = w.labels.kv_events;
    if (!endpoint) return null;
    if (!this.#d.grpc) {
      this.#d.log.warn(
        "worker publishes KV events but the gateway has no tokenizer to match them to requests (give --model-path or --tokenizer-path); its events are not used",
        { worker: w.url, kv_events: endpoint },
      );
      return null;
    }
    return (sink) => {
      const replayEndpoint = w.labels.kv_events_replay ?? null;
      const sub = new ZmqSubscriber({ endpoint, replayEndpoint, clock, logger: this.#d.log }, sink);
      sub.start();
      return sub;
    };
  }
}

/** A gRPC worker's `SubscribeKvEvents` from `cursor`, its batches as the gateway's types. */
function grpcSource(grpc: GrpcWorkers, url: string, cursor: number): CursorSource {
  const stream = grpc.eventsClient(url).subscribeKvEvents(cursor);
  return {
    next: async () => {
      const b = await stream.next();
      return b === null ? null : fromPb(b);
    },
    cancel: () => stream.cancel(),
  };
}

/** A `KvEventBatch` message as the gateway's batch. */
export function fromPb(b: KvEventBatchPb): KvEventBatch {
  const events: KvEvent[] = [];
  let skipped = 0;
  for (const e of b.events) {
    if (e.stored) {
      const blocks = e.stored.blocks;
      events.push({
        kind: "stored",
        blocks: blocks.map((x) => ({ hash: x.block_hash, tokenIds: x.token_ids })),
        parentHash: e.stored.parent_block_hash ?? null,
        blockSize: blocks[0]?.block_size ?? 0,
        loraId: null,
        medium: null,
      });
    } else if (e.removed) {
      events.push({ kind: "removed", hashes: e.removed.block_hashes, medium: null });
    } else if (e.cleared) events.push({ kind: "cleared" });
    else skipped++;
  }
  return { seq: b.sequence_number, ts: b.timestamp, events, rank: b.dp_rank ?? null, skipped };
}
