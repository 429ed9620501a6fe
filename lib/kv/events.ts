/**
 * The gateway's KV-cache events, normalised from what vLLM and SGLang publish: which blocks a
 * worker's cache stored, which it removed, and when it dropped everything. A consumer (the
 * cache index) sees only these types, never the engines' wire layout.
 *
 * Block hashes are strings, one form per hash kind, so they compare with `===` and key a `Map`:
 * an integer hash (msgpack uint64 or int64, exact beyond 2^53; SGLang sends signed 64-bit) is
 * its decimal form (`"18446744073709551615"`, `"-42"`); a byte-string hash (newer vLLM) is `0x`
 * and lowercase hex (`"0x9f1c…"`). The two forms never collide (decimal has no `x`). Hashes are
 * opaque: equal strings mean the same block of the same engine, nothing more.
 */

/** An engine's block hash: an integer in decimal, or bytes as `0x` and lowercase hex. */
export type BlockHash = string;

/** One stored block: its engine hash and the tokens it holds. */
export interface StoredBlock {
  /** The engine's hash of this block (chained over its prefix). */
  hash: BlockHash;
  /** The block's token ids; empty when the engine sent none (vLLM's CPU-offload stores). */
  tokenIds: number[];
}

/** Blocks a worker's cache now holds, each the child of the one before, the first of `parentHash`. */
export interface BlocksStored {
  /** Kind tag. */
  kind: "stored";
  /** The blocks in order along the prefix. */
  blocks: StoredBlock[];
  /** The block the first one extends; null when it starts a sequence. */
  parentHash: BlockHash | null;
  /** Tokens per block. */
  blockSize: number;
  /** The LoRA adapter's id; null for the base model. */
  loraId: number | null;
  /** Where the blocks live (`GPU`, `CPU`, …); null when the engine did not say. */
  medium: string | null;
}

/** Blocks a worker's cache evicted. */
export interface BlocksRemoved {
  /** Kind tag. */
  kind: "removed";
  /** The evicted blocks' hashes. */
  hashes: BlockHash[];
  /** Where they lived; null when the engine did not say. */
  medium: string | null;
}

/** A worker's cache dropped every block (a reset or a restart). */
export interface AllBlocksCleared {
  /** Kind tag. */
  kind: "cleared";
}

/** One KV-cache event. */
export type KvEvent = BlocksStored | BlocksRemoved | AllBlocksCleared;

/** One published batch of events, in the order the engine applied them. */
export interface KvEventBatch {
  /** The publisher's sequence number (0 at its start, one more per batch). */
  seq: number;
  /** The engine's clock when it published, in seconds since the epoch. */
  ts: number;
  /** The events. */
  events: KvEvent[];
  /** The data-parallel rank that published it; null when the engine did not say. */
  rank: number | null;
  /** Events of kinds this gateway does not know, left out of `events` (newer engines). */
  skipped: number;
}
