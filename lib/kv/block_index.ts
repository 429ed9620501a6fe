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
 * report a false match, and a worker's engine hashes are folded to 53 bits the same way (two of
 * its blocks colliding would make one's removal drop the other).
 *
 * Memory: the keys and each worker's hashes live in typed-array tables (`NumTable`), holders as
 * one bit per worker, so millions of blocks are a few arrays rather than millions of objects the
 * garbage collector copies and marks.
 */

import type { Clock } from "../core/clock.ts";
import type { BlockHash, KvEvent, StoredBlock } from "./events.ts";
import { foldString, NumTable } from "./num_table.ts";

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

/** One worker: its bit in the holders' words, and its engine hashes (folded) → our keys. */
interface Holder {
  slot: number;
  hashes: NumTable;
}

/** The blocks workers hold for one model; see the module comment. */
export class BlockIndex {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  /** Tokens per block, learned from the first stored block; 0 until then. */
  #blockSize = 0;
  /** Our key → when last stored or read (column 0), and a bit per holding worker's slot. */
  readonly #keys = new NumTable(1, 1);
  readonly #workers = new Map<string, Holder>();
  /** Worker by slot (null: free). */
  readonly #slots: (string | null)[] = [];

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
    return this.#workers.get(worker)?.hashes.size ?? 0;
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
      const at = own ? own.hashes.find(foldString(parent)) : -1;
      if (at < 0) return "unknown_parent";
      key = own!.hashes.f64(at);
    }
    own ??= this.#add(worker);
    const now = this.#clock.now();
    const word = own.slot >>> 5;
    const bit = 1 << (own.slot & 31);
    for (const b of blocks) {
      key = chainKey(key, b.tokenIds);
      const at = own.hashes.insert(foldString(b.hash));
      const previous = own.hashes.created ? 0 : own.hashes.f64(at);
      if (previous !== 0 && previous !== key) this.#release(own.slot, previous);
      own.hashes.setF64(at, key);
      const k = this.#keys.insert(key);
      this.#keys.setF64(k, now);
      this.#keys.u32[this.#keys.wordsAt(k) + word] |= bit;
    }
    return null;
  }

  /** `worker` evicted the blocks its engine hashes `hashes` (unknown ones are ignored). */
  remove(worker: string, hashes: readonly BlockHash[]): void {
    const own = this.#workers.get(worker);
    if (!own) return;
    for (const hash of hashes) {
      const folded = foldString(hash);
      const at = own.hashes.find(folded);
      if (at < 0) continue;
      const key = own.hashes.f64(at);
      own.hashes.delete(folded);
      this.#release(own.slot, key);
    }
  }

  /** `worker` holds nothing (its cache was cleared, it restarted, or it left). */
  clearWorker(worker: string): void {
    const own = this.#workers.get(worker);
    if (!own) return;
    const keys: number[] = [];
    for (const at of own.hashes.slots()) keys.push(own.hashes.f64(at));
    for (const key of keys) this.#release(own.slot, key);
    this.#workers.delete(worker);
    this.#slots[own.slot] = null;
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
    if (tokens.length < size) return out;
    const first = chainKey(0, tokens, 0, size);
    if (this.#keys.find(first) < 0) return out; // the common miss, before any allocation
    const n = this.#keys.words;
    const live = new Uint32Array(n);
    const depth = new Array<number>(n * 32).fill(0);
    let key = 0;
    for (let at = 0; at + size <= tokens.length; at += size) {
      key = at === 0 ? first : chainKey(key, tokens, at, at + size);
      const k = this.#keys.find(key);
      if (k < 0) break;
      this.#keys.setF64(k, now);
      const words = this.#keys.u32;
      const from = this.#keys.wordsAt(k);
      let any = 0;
      for (let i = 0; i < n; i++) {
        live[i] = at === 0 ? words[from + i] : live[i] & words[from + i];
        any |= live[i];
        for (let m = live[i]; m !== 0; m &= m - 1) {
          depth[i * 32 + (31 - Math.clz32(m & -m))] = at + size;
        }
      }
      if (any === 0) break;
    }
    for (let s = 0; s < depth.length; s++) {
      const w = this.#slots[s];
      if (depth[s] > 0 && w) out.set(w, depth[s]);
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
    const keys = this.#keys;
    if (this.#ttlMs > 0) {
      for (const k of keys.slots()) if (now - keys.f64(k) > this.#ttlMs) doomed.add(keys.keyAt(k));
    }
    const left = keys.size - doomed.size;
    if (this.#maxEntries > 0 && left > this.#maxEntries) {
      const target = Math.floor(this.#maxEntries * 0.9);
      const oldest: [number, number][] = [];
      for (const k of keys.slots()) {
        const key = keys.keyAt(k);
        if (!doomed.has(key) && now - keys.f64(k) > SPARE_MS) oldest.push([key, keys.f64(k)]);
      }
      oldest.sort((x, y) => x[1] - y[1]);
      for (let i = 0; i < oldest.length && left - i > target; i++) doomed.add(oldest[i][0]);
    }
    if (doomed.size === 0) return 0;
    for (const [, own] of this.#workers) {
      const gone: number[] = [];
      for (const at of own.hashes.slots()) {
        if (doomed.has(own.hashes.f64(at))) gone.push(own.hashes.keyAt(at));
      }
      for (const h of gone) own.hashes.delete(h);
    }
    for (const key of doomed) keys.delete(key);
    return doomed.size;
  }

  /** Registers `worker` in a free slot (widening the holders' words past 32 workers). */
  #add(worker: string): Holder {
    let slot = this.#slots.indexOf(null);
    if (slot < 0) slot = this.#slots.push(null) - 1;
    this.#slots[slot] = worker;
    this.#keys.widen((slot >>> 5) + 1);
    const own: Holder = { slot, hashes: new NumTable(1, 0) };
    this.#workers.set(worker, own);
    return own;
  }

  /** The worker in `slot` no longer holds `key`. */
  #release(slot: number, key: number): void {
    const k = this.#keys.find(key);
    if (k < 0) return;
    const words = this.#keys.u32;
    const from = this.#keys.wordsAt(k);
    words[from + (slot >>> 5)] &= ~(1 << (slot & 31));
    for (let i = 0; i < this.#keys.words; i++) if (words[from + i] !== 0) return;
    this.#keys.delete(key);
  }
}

/** Whether blocks in `medium` are on the GPU (unsaid counts as the GPU: engines omit it there). */
function onGpu(medium: string | null): boolean {
  return medium === null || medium.toUpperCase() === "GPU";
}
