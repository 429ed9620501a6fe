/**
 * The blocks each worker's engine says it holds, from its KV events: one index per model. In:
 * `stored` (blocks with their token ids, under a parent block), `removed` and `cleared` per
 * worker; out: for a request's token ids, how many leading tokens each worker holds.
 *
 * Keys are ours, not the engine's: a block's key chains its parent's key with its token ids
 * (`chainKey`), so a key names the whole prefix up to the block's end, and any engine hash seed
 * is irrelevant. Each worker maps its engine's hashes to our keys (removals name engine hashes);
 * a stored block whose parent hash the worker never stored cannot be chained: the call reports
 * it and the caller resynchronises that worker (replay or a fresh subscription after
 * `clearWorker`). The block size is the one the first stored block carried; a worker whose
 * blocks have another size is refused the same way.
 *
 * Bounds: a key not stored or read for `ttlMs` is pruned, and above `maxEntries` keys the least
 * recently touched go until 90 % remain (keys touched in the last 2 s are spared), at `prune`.
 * Known gap: keys are 53-bit hashes; two prefixes colliding (odds about 2^-53 a pair) would
 * report a false match.
 */

import type { Clock } from "../core/clock.ts";
import type { BlockHash, KvEvent, StoredBlock } from "./events.ts";

/** Why a stored event could not be applied. */
export type StoreRefusal = "unknown_parent" | "block_size";

/** Options of a `BlockIndex`. */
export interface BlockIndexOptions {
  /** Time for TTL pruning. */
  clock: Clock;
  /** A key neither stored nor read for this long is pruned; 0 is off (default 0). */
  ttlMs?: number;
  /** Most keys before the least recently touched are pruned; 0 is off (default 0). */
  maxEntries?: number;
}

/** A key: who holds it and when it was last stored or read. */
interface Holders {
  workers: Set<string>;
  touched: number;
}

/** Keys touched this recently survive a capacity prune. */
const SPARE_MS = 2000;

/** The key of a block after the block keyed `parent` (0: the first block) holding `tokens`. */
export function chainKey(parent: number, tokens: ArrayLike<number>, from = 0, to = tokens.length) {
  let a = (0x811c9dc5 ^ (parent % 0x100000000)) >>> 0;
  let b = (0x2f6b3a1d ^ Math.floor(parent / 0x100000000)) >>> 0;
  for (let i = from; i < to; i++) {
    const t = tokens[i] | 0;
    a = Math.imul(a ^ (t & 0xffff), 0x01000193);
    a = Math.imul(a ^ (t >>> 16), 0x01000193);
    b = Math.imul(b ^ t, 0x5bd1e995);
    b ^= b >>> 15;
  }
  // 32 bits of one, 21 of the other: a safe integer, never 0 for a real block in practice.
  return (a >>> 0) * 0x200000 + (b >>> 11) + 1;
}

/** The blocks workers hold for one model; see the module comment. */
export class BlockIndex {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  /** Tokens per block, learned from the first stored block; 0 until then. */
  #blockSize = 0;
  /** Our key → its holders. */
  readonly #keys = new Map<number, Holders>();
  /** Per worker: engine hash → our key. */
  readonly #workers = new Map<string, Map<string, number>>();

  constructor(o: BlockIndexOptions) {
    this.#clock = o.clock;
    this.#ttlMs = o.ttlMs ?? 0;
    this.#maxEntries = o.maxEntries ?? 0;
  }

  /** Tokens per block (0 before the first stored block). */
  get blockSize(): number {
    return this.#blockSize;
  }

  /** Keys held by at least one worker. */
  get size(): number {
    return this.#keys.size;
  }

  /** Whether no worker holds anything (then the policy falls back to its tree). */
  get empty(): boolean {
    return this.#keys.size === 0;
  }

  /** Blocks `worker` holds. */
  blocksOf(worker: string): number {
    return this.#workers.get(worker)?.size ?? 0;
  }

  /**
   * Applies one event of `worker`'s engine; returns why a stored event could not be applied
   * (then nothing of it was), else null. Blocks off the GPU (another `medium`) or without token
   * ids (vLLM's CPU offload) are not what a prefill reuses: they are left out.
   */
  apply(worker: string, e: KvEvent): StoreRefusal | null {
    if (e.kind === "cleared") this.clearWorker(worker);
    else if (e.kind === "removed") {
      if (onGpu(e.medium)) this.remove(worker, e.hashes);
    } else if (onGpu(e.medium) && e.blocks.every((b) => b.tokenIds.length > 0)) {
      return this.store(worker, e.parentHash, e.blocks);
    }
    return null;
  }

  /**
   * `worker` stored `blocks` in order under the block its engine hashes `parent` (null: from
   * the start). Returns null when applied, or why it could not be (then nothing was applied).
   */
  store(
    worker: string,
    parent: BlockHash | null,
    blocks: readonly StoredBlock[],
  ): StoreRefusal | null {
    if (blocks.length === 0) return null;
    const size = blocks[0].tokenIds.length;
    if (this.#blockSize === 0) this.#blockSize = size;
    if (blocks.some((b) => b.tokenIds.length !== this.#blockSize)) return "block_size";
    let own = this.#workers.get(worker);
    let key = 0;
    if (parent !== null) {
      const k = own?.get(parent);
      if (k === undefined) return "unknown_parent";
      key = k;
    }
    if (!own) this.#workers.set(worker, own = new Map());
    const now = this.#clock.now();
    for (const b of blocks) {
      key = chainKey(key, b.tokenIds);
      const previous = own.get(b.hash);
      if (previous !== undefined && previous !== key) this.#release(worker, previous);
      own.set(b.hash, key);
      let h = this.#keys.get(key);
      if (!h) this.#keys.set(key, h = { workers: new Set(), touched: now });
      h.workers.add(worker);
      h.touched = now;
    }
    return null;
  }

  /** `worker` evicted the blocks its engine hashes `hashes` (unknown ones are ignored). */
  remove(worker: string, hashes: readonly BlockHash[]): void {
    const own = this.#workers.get(worker);
    if (!own) return;
    for (const hash of hashes) {
      const key = own.get(hash);
      if (key === undefined) continue;
      own.delete(hash);
      this.#release(worker, key);
    }
  }

  /** `worker` holds nothing (its cache was cleared, it restarted, or it left). */
  clearWorker(worker: string): void {
    const own = this.#workers.get(worker);
    if (!own) return;
    for (const key of own.values()) this.#release(worker, key);
    this.#workers.delete(worker);
  }

  /**
   * For each worker holding the first block of `tokens`, how many leading tokens it holds
   * (whole blocks, consecutive from the start); reading touches the keys it crosses.
   */
  match(tokens: readonly number[]): Map<string, number> {
    const out = new Map<string, number>();
    const size = this.#blockSize;
    if (size === 0) return out;
    const now = this.#clock.now();
    let live: Set<string> | null = null;
    let key = 0;
    for (let at = 0; at + size <= tokens.length; at += size) {
      key = chainKey(key, tokens, at, at + size);
      const h = this.#keys.get(key);
      if (!h) break;
      h.touched = now;
      if (live === null) live = new Set(h.workers);
      else for (const w of live) if (!h.workers.has(w)) live.delete(w);
      if (live.size === 0) break;
      for (const w of live) out.set(w, at + size);
    }
    return out;
  }

  /**
   * Drops keys past the TTL and, above `maxEntries`, the least recently touched down to 90 %
   * (sparing those touched in the last 2 s); returns how many went.
   */
  prune(): number {
    const now = this.#clock.now();
    const doomed = new Set<number>();
    if (this.#ttlMs > 0) {
      for (const [key, h] of this.#keys) if (now - h.touched > this.#ttlMs) doomed.add(key);
    }
    const left = this.#keys.size - doomed.size;
    if (this.#maxEntries > 0 && left > this.#maxEntries) {
      const target = Math.floor(this.#maxEntries * 0.9);
      const oldest = [...this.#keys].filter(([k, h]) =>
        !doomed.has(k) && now - h.touched > SPARE_MS
      )
        .sort((x, y) => x[1].touched - y[1].touched);
      for (let i = 0; i < oldest.length && left - i > target; i++) doomed.add(oldest[i][0]);
    }
    if (doomed.size === 0) return 0;
    for (const [, own] of this.#workers) {
      for (const [hash, key] of own) if (doomed.has(key)) own.delete(hash);
    }
    for (const key of doomed) this.#keys.delete(key);
    return doomed.size;
  }

  /** `worker` no longer holds `key`. */
  #release(worker: string, key: number): void {
    const h = this.#keys.get(key);
    if (!h) return;
    h.workers.delete(worker);
    if (h.workers.size === 0) this.#keys.delete(key);
  }
}

/** Whether blocks in `medium` are on the GPU (unsaid counts as the GPU: engines omit it there). */
function onGpu(medium: string | null): boolean {
  return medium === null || medium.toUpperCase() === "GPU";
}
