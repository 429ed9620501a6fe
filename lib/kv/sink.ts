/**
 * What a KV-event stream hands its consumer (the cache index): decoded batches in sequence
 * order, and status changes the consumer may act on (forget a worker's blocks after an
 * unrecoverable gap or a restarted publisher; mark it stale while disconnected).
 */

import type { KvEventBatch } from "./events.ts";

/** A change in a worker's event stream. */
export type KvStreamStatus =
  /** Subscribed to the publisher (at start and after each reconnection). */
  | { kind: "connected"; endpoint: string }
  /** Could not connect or subscribe; the next try is in `retryInMs`. */
  | { kind: "connect_failed"; endpoint: string; reason: string; retryInMs: number }
  /** The connection ended; reconnecting in `retryInMs`. Events may be missed meanwhile. */
  | { kind: "disconnected"; endpoint: string; reason: string; retryInMs: number }
  /** Batches `from`..`to` were missed and then replayed, in order, before the next batch. */
  | { kind: "gap_recovered"; from: number; to: number }
  /**
   * Of batches `from`..`to`, `missing` are lost for good (no replay endpoint, the publisher's
   * buffer no longer holds them, or the replay failed): the consumer's view of the worker may
   * be wrong until the worker's cache is rebuilt.
   */
  | { kind: "gap_unrecoverable"; from: number; to: number; missing: number; reason: string }
  /**
   * The sequence went back (`seq` after `lastSeq`): a new publisher, so the engine restarted
   * and its cache was emptied; batches from `seq` on describe the new cache.
   */
  | { kind: "publisher_restarted"; lastSeq: number; seq: number }
  /** A message that is not a KV-event batch (bad framing or payload); it is skipped. */
  | { kind: "bad_message"; seq: number | null; reason: string };

/** The consumer of one worker's KV-event stream. Calls are synchronous and in order. */
export interface KvEventSink {
  /** A decoded batch, its `seq` above every earlier one since the last restart. */
  onBatch(batch: KvEventBatch): void;
  /** A status change. */
  onStatus(status: KvStreamStatus): void;
}
