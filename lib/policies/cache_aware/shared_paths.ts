/**
 * What cache_aware shares with the other routers of a mesh, and what it keeps of theirs.
 *
 * A routing decision is published as a few deltas of a few bytes each: hashes of the request's
 * prefix path cut at block boundaries (`pathHashes`; blocks of `--block-size` tokens, or
 * `DEFAULT_CHARS_PER_TOKEN` times as many characters for text: a fixed chunk, not the learned
 * ratio, so that every router hashes the same paths whatever its answers taught it), each with
 * the chosen worker. The boundaries are a ladder down from the deepest (`ladder`: the deepest,
 * then 1, 2, 4, … blocks above it), because the next request of a conversation seldom extends
 * the whole of the last one: a chat template's closing tokens, or the last partial block a trace
 * names anew, differ, and a peer holding only the deepest hash would find nothing. Text never
 * travels in deltas, so a peer cannot put a delta's path into its radix tree unless it already
 * holds that path; instead it keeps the delta as a *placement* (hash → up to four workers, most
 * recent first, LRU-bounded) and consults placements while routing: the request's own boundary
 * hashes are computed in one pass and the deepest boundary with a placement on an eligible worker
 * counts as a match of that depth. The request is then inserted into the radix tree as usual, so
 * a conversation that moves from router A to router B continues on A's worker and B's tree learns
 * it. Whole paths travel only in repairs (`lib/mesh/adapters/tree_sync.ts`), which also carry
 * placements.
 *
 * Evictions stay local: placements past the bound go least recently used first. Corrections
 * (tree feedback) travel: a worker that reported less cached than believed is dropped from the
 * placements of the paths forgotten (`corrections.ts`).
 */

import { DEFAULT_CHARS_PER_TOKEN } from "../../core/chars_per_token.ts";
import { blockDigests } from "../hash_ring.ts";

/** Hash domain of tree paths (separate from the ring's and prefix_hash's). */
const SEED_PATH = 0x70617468;

/** Most workers a placement remembers. */
export const MAX_PLACEMENT_HOLDERS = 4;

/** Placements a model's tree kind keeps by default (about ten a decision: `ladder`). */
export const DEFAULT_MAX_PLACEMENTS = 1 << 17;

/** The tree kinds: text for HTTP requests, token ids for pre-tokenized ones. */
export type TreeKind = "string" | "token";

/**
 * Units per path block for `kind` at `--block-size` `blockSize` (the mesh's hashing chunk, fixed
 * for text: see the module comment).
 */
export function blockUnits(kind: TreeKind, blockSize: number): number {
  return kind === "string" ? blockSize * DEFAULT_CHARS_PER_TOKEN : blockSize;
}

/**
 * The hashes of `key`'s prefixes at every whole block, shallowest first (`[i]` covers
 * `(i + 1) × block` units); empty when the key is shorter than one block. One pass, 53-bit
 * values (exact as JavaScript numbers and on the wire).
 */
export function pathHashes(key: string | readonly number[], block: number): number[] {
  return blockDigests(key, block, SEED_PATH);
}

/**
 * Which of a path's `n` boundary hashes a decision publishes, deepest first: the deepest, then
 * those 1, 2, 4, … blocks above it, down to the first. A request sharing the path down to any
 * block finds a placement no more blocks above that point than it lies below the deepest (a
 * conversation's next turn, which shares all but the last one's tail, loses at most that tail
 * again), for at most log2(n) + 3 deltas.
 */
export function ladder(n: number): number[] {
  if (n <= 0) return [];
  const out = [n - 1];
  for (let step = 1; n - 1 - step >= 0; step *= 2) out.push(n - 1 - step);
  if (out[out.length - 1] !== 0) out.push(0);
  return out;
}

/**
 * How long a decision's ladder is not published again for the same path and worker while the
 * placement stands: about a tree-sync round, which sends each (hash, worker) pair once. A
 * placement's holders are read as a set (their order only decides which of more than
 * `MAX_PLACEMENT_HOLDERS` goes), so a skipped repeat changes no decision; its placement time is
 * at most this much older. A correction that took the worker off the path is not skipped.
 */
export const REPUBLISH_MS = 1000;

/** Most paths `RecentPairs` remembers; past it, it starts again empty. */
const MAX_RECENT_PATHS = 4096;

/** The (path hash, worker) pairs seen in the last `windowMs`, per path since its first. */
export class RecentPairs {
  readonly #windowMs: number;
  readonly #paths = new Map<number, { since: number; workers: string[] }>();

  constructor(windowMs = REPUBLISH_MS) {
    this.#windowMs = windowMs;
  }

  /** Whether (`hash`, `worker`) is new in the window at `now`; remembers it. */
  first(hash: number, worker: string, now: number): boolean {
    const p = this.#paths.get(hash);
    if (p !== undefined && now - p.since < this.#windowMs) {
      if (p.workers.includes(worker)) return false;
      p.workers.push(worker);
      return true;
    }
    if (p !== undefined) {
      p.since = now;
      p.workers = [worker];
      return true;
    }
    if (this.#paths.size >= MAX_RECENT_PATHS) this.#paths.clear();
    this.#paths.set(hash, { since: now, workers: [worker] });
    return true;
  }
}

/** The deepest placement found for a request: its depth in units and its workers. */
export interface PlacementMatch {
  /** Units covered (block count × block units). */
  readonly depth: number;
  /** Workers, most recent first. */
  readonly tenants: readonly string[];
}

/** A worker placed at a path hash, and when (the clock's ms) it was placed there last. */
interface Holder {
  tenant: string;
  at: number;
}

/** Path hash → workers, for one model and tree kind. */
export class Placements {
  readonly #map = new Map<number, Holder[]>();
  readonly #max: number;

  /** Keeps at most `max` hashes (least recently used dropped first). */
  constructor(max = DEFAULT_MAX_PLACEMENTS) {
    this.#max = Math.max(1, max);
  }

  /** Hashes held. */
  get size(): number {
    return this.#map.size;
  }

  /** Whether `tenant` is among `hash`'s holders. */
  holds(hash: number, tenant: string): boolean {
    return this.#map.get(hash)?.some((h) => h.tenant === tenant) ?? false;
  }

  /** Whether `hash` has a placement. */
  has(hash: number): boolean {
    return this.#map.has(hash);
  }

  /**
   * Makes `tenant` the most recent holder of `hash`, placed at `at` (default 0); returns whether
   * the hash was known.
   */
  add(hash: number, tenant: string, at = 0): boolean {
    const held = this.#map.get(hash);
    if (held === undefined) {
      if (this.#map.size >= this.#max) this.#evict();
      this.#map.set(hash, [{ tenant, at }]);
      return false;
    }
    const i = held.findIndex((h) => h.tenant === tenant);
    if (i >= 0) held.splice(i, 1);
    held.unshift({ tenant, at });
    if (held.length > MAX_PLACEMENT_HOLDERS) held.length = MAX_PLACEMENT_HOLDERS;
    this.#map.delete(hash);
    this.#map.set(hash, held);
    return true;
  }

  /**
   * Drops the least recently used sixteenth of the bound in one pass. One at a time, each
   * eviction would scan the map's deleted slots from its start again (V8 keeps a Map's order in
   * a table whose holes `keys()` walks until the next rehash): at the bound, that was 2/3 of a
   * meshed router's CPU with a new prompt every request.
   */
  #evict(): void {
    let n = Math.max(1, this.#max >> 4);
    for (const hash of this.#map.keys()) {
      this.#map.delete(hash);
      if (--n === 0) break;
    }
  }

  /**
   * The deepest of `hashes` (as `pathHashes` returns them) with a holder `eligible` accepts (given
   * when it was placed there); refreshes it. Null when none.
   */
  deepest(
    hashes: readonly number[],
    block: number,
    eligible: (tenant: string, at: number) => boolean,
  ): PlacementMatch | null {
    for (let i = hashes.length - 1; i >= 0; i--) {
      const held = this.#map.get(hashes[i]);
      if (held === undefined) continue;
      const tenants = held.filter((h) => eligible(h.tenant, h.at)).map((h) => h.tenant);
      if (tenants.length === 0) continue;
      this.#map.delete(hashes[i]);
      this.#map.set(hashes[i], held);
      return { depth: (i + 1) * block, tenants };
    }
    return null;
  }

  /** Takes `tenant` off `hash`'s holders (a correction); returns whether it was one. */
  drop(hash: number, tenant: string): boolean {
    const held = this.#map.get(hash);
    const i = held?.findIndex((h) => h.tenant === tenant) ?? -1;
    if (i < 0) return false;
    if (held!.length === 1) this.#map.delete(hash);
    else held!.splice(i, 1);
    return true;
  }

  /** Forgets `tenant` everywhere. */
  removeTenant(tenant: string): void {
    for (const [h, held] of this.#map) {
      const i = held.findIndex((x) => x.tenant === tenant);
      if (i < 0) continue;
      if (held.length === 1) this.#map.delete(h);
      else held.splice(i, 1);
    }
  }

  /**
   * Every placement, least recently used first (replaying them in order rebuilds the map).
   * The hashes are listed when the iteration starts (placements reorder on use); one dropped
   * meanwhile is skipped.
   */
  *entries(): Iterable<{ hash: number; tenants: readonly string[] }> {
    for (const hash of [...this.#map.keys()]) {
      const held = this.#map.get(hash);
      if (held !== undefined) yield { hash, tenants: held.map((h) => h.tenant) };
    }
  }
}
