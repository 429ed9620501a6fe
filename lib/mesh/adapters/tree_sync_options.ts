/**
 * The options of cache-aware tree sync (`tree_sync.ts`) with their defaults, and the events it
 * counts. Shared by the sync, the asking side of repair (`tree_requester.ts`) and the answering
 * side (`tree_responder.ts`).
 */

import type { Logger } from "../../core/log.ts";
import type { PolicyReplicas } from "../../policies/replicas.ts";
import type { Clock } from "../../core/clock.ts";

/** What tree sync counts (for metrics and benchmarks). */
export type TreeCounter =
  | "deltas_sent"
  | "deltas_received"
  | "deltas_applied"
  | "deltas_unknown"
  | "deltas_dropped"
  | "delta_bytes_sent"
  | "repairs_started"
  | "repairs_finished"
  | "repairs_failed"
  | "repairs_retried"
  | "repairs_folded"
  | "pages_sent"
  | "pages_received"
  | "pages_stale"
  | "page_bytes_sent"
  | "requests_refused"
  | "repairs_queued"
  | "entries_skipped"
  | "corrections_sent"
  | "corrections_received"
  | "corrections_relayed"
  | "corrections_dropped"
  | "malformed";

/** Options of tree sync. */
export interface TreeSyncOptions {
  /** The policies' shared trees. */
  replicas: PolicyReplicas;
  /** Time. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** Random number in [0, 1). */
  random: () => number;
  /** This router's name (session ids). */
  name: string;
  /** Deltas go out this often (1000 ms). */
  roundMs?: number;
  /** A repair without progress this long is retried (5000 ms). */
  progressMs?: number;
  /** Retries of a repair before it fails (3). */
  maxRetries?: number;
  /** Largest page payload (about 2 MiB). */
  pageBytes?: number;
  /** Most entries a page holds (512), so that encoding or decoding one page takes a few ms. */
  pageEntries?: number;
  /** Most path units (characters or token ids, whole paths) a page holds (2^21). */
  pageUnits?: number;
  /** Longest path sent; longer ones are skipped (2^20 units). */
  maxPathUnits?: number;
  /** Pages wait while the stream to the requester holds this many frames (16). */
  maxQueued?: number;
  /** Responder work between two yields (4 ms). */
  sliceMs?: number;
  /**
   * Deltas buffered per round at most; more are dropped and counted (8,192: above what one
   * router routes in a second, and a round that encodes or applies in a few ms).
   */
  maxDeltas?: number;
  /** Repairs answered at once at most; more are refused (the requester retries) (4). */
  maxResponses?: number;
  /**
   * Corrections (tree feedback) sent per round at most, besides at most `pageUnits` of their
   * branches' units; more are dropped and counted (256).
   */
  maxCorrections?: number;
  /** Hears each counted event with its amount. */
  count?: (what: TreeCounter, n: number) => void;
}

/** `o` with every default filled in. */
export function withDefaults(o: TreeSyncOptions): Required<TreeSyncOptions> {
  return {
    roundMs: 1000,
    progressMs: 5000,
    maxRetries: 3,
    pageBytes: 2 * 1024 * 1024 - 256,
    pageEntries: 512,
    pageUnits: 1 << 21,
    maxPathUnits: 1 << 20,
    maxQueued: 16,
    sliceMs: 4,
    maxDeltas: 8192,
    maxResponses: 4,
    maxCorrections: 256,
    count: () => {},
    ...o,
  };
}
