/**
 * The consistent hash ring shared by `consistent_hashing` and `prefix_hash` (SMG's
 * `worker/hash_ring.rs`): 150 virtual nodes per unique worker URL at `hash53("{url}#{i}")`,
 * sorted by position; a key at position p belongs to the first node at or after p (wrapping),
 * and a lookup walks clockwise, skipping URLs already tried, to the first URL a predicate
 * accepts. Restricting the walk to a subset gives exactly the ring of that subset, so one ring
 * of every URL ever seen serves every candidate set: a down worker's keys go to the next
 * candidate clockwise and come back when it recovers, and adding or removing a worker moves
 * about 1/n of the keys.
 *
 * Hash: not SMG's blake3 (placement parity would only matter for a fleet mixing both) but a
 * cyrb53-style pair of 32-bit multiply-xor lanes with a murmur-like finaliser, combined into a
 * 53-bit integer so it stays an exact JS number. Stable across runs and platforms; strings are
 * hashed as UTF-16 code units, token ids as 32-bit words.
 *
 * `CandidateRing` adapts the ring to the policy interface: it adds unseen candidate URLs on
 * sight, marks the current candidates with an epoch stamp (no per-request allocation), and
 * forgets a URL when its worker is removed. Additions are merged lazily in one batch at the next
 * lookup, so first sight of 512 workers costs one sort, not 512. Per request: O(candidates) map
 * probes plus an O(log ring) binary search and a short walk (expected ring members / candidates
 * entries when the ring holds workers that are not candidates, e.g. another model's).
 */

import type { WorkerView } from "../core/types.ts";

/** Virtual nodes per worker URL (SMG's constant). */
export const VIRTUAL_NODES = 150;

const M1 = 2654435761;
const M2 = 1597334677;

/** A 53-bit digest of the two lanes (cyrb53's finaliser). */
function finish(a: number, b: number): number {
  let h1 = Math.imul(a ^ (a >>> 16), 2246822507);
  h1 ^= Math.imul(b ^ (b >>> 13), 3266489909);
  let h2 = Math.imul(b ^ (b >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** Stable 53-bit hash of a string's UTF-16 code units; `seed` separates key domains. */
export function hash53(s: string, seed = 0): number {
  let a = 0xdeadbeef ^ seed;
  let b = 0x41c6ce57 ^ seed;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, M1);
    b = Math.imul(b ^ c, M2);
  }
  return finish(a, b);
}

/** An incremental `hash53`: push 32-bit words, read the digest of the prefix so far at any time. */
export class PrefixHasher {
  #a: number;
  #b: number;
  /** Starts an empty prefix; the same seed and words give `hash53`'s value for strings. */
  constructor(seed = 0) {
    this.#a = 0xdeadbeef ^ seed;
    this.#b = 0x41c6ce57 ^ seed;
  }
  /** Appends one word (a UTF-16 code unit or a token id). */
  push(word: number): void {
    this.#a = Math.imul(this.#a ^ word, M1);
    this.#b = Math.imul(this.#b ^ word, M2);
  }
  /** The hash of everything pushed so far. */
  digest(): number {
    return finish(this.#a, this.#b);
  }
}

/**
 * `PrefixHasher`'s digests of `units`' prefixes at every whole `block` (shallowest first), in
 * one pass with the lanes in locals (several times faster than a `push` per unit).
 */
export function blockDigests(
  units: string | readonly number[],
  block: number,
  seed: number,
): number[] {
  const out: number[] = [];
  const n = units.length - units.length % block;
  let a = 0xdeadbeef ^ seed;
  let b = 0x41c6ce57 ^ seed;
  if (typeof units === "string") {
    for (let i = 0; i < n;) {
      const c = units.charCodeAt(i++);
      a = Math.imul(a ^ c, M1);
      b = Math.imul(b ^ c, M2);
      if (i % block === 0) out.push(finish(a, b));
    }
  } else {
    for (let i = 0; i < n;) {
      const c = units[i++] >>> 0;
      a = Math.imul(a ^ c, M1);
      b = Math.imul(b ^ c, M2);
      if (i % block === 0) out.push(finish(a, b));
    }
  }
  return out;
}

/** A consistent hash ring of worker URLs with `VIRTUAL_NODES` virtual nodes each. */
export class HashRing {
  readonly #slotOf = new Map<string, number>();
  /** slot → URL (null once freed). */
  readonly #urls: (string | null)[] = [];
  readonly #free: number[] = [];
  /** Slots added since the last merge. */
  #pending: number[] = [];
  #pos = new Float64Array(0);
  #slot = new Int32Array(0);
  #seen = new Uint32Array(0);
  #epoch = 0;

  /** Unique URLs on the ring. */
  get size(): number {
    return this.#slotOf.size;
  }

  /** Virtual nodes on the ring (size × VIRTUAL_NODES). */
  get nodes(): number {
    this.#merge();
    return this.#pos.length;
  }

  /** The URL's slot (a small integer, stable while the URL stays on the ring), or -1. */
  slotOf(url: string): number {
    return this.#slotOf.get(url) ?? -1;
  }

  /** The URL in `slot`, or null. */
  urlOf(slot: number): string | null {
    return this.#urls[slot] ?? null;
  }

  /** Adds `url` (no-op if present); returns its slot. Nodes are placed at the next lookup. */
  add(url: string): number {
    const have = this.#slotOf.get(url);
    if (have !== undefined) return have;
    const slot = this.#free.pop() ?? this.#urls.length;
    this.#urls[slot] = url;
    this.#slotOf.set(url, slot);
    this.#pending.push(slot);
    return slot;
  }

  /** Removes `url` and its nodes (O(ring)); false if it was not on the ring. */
  remove(url: string): boolean {
    const slot = this.#slotOf.get(url);
    if (slot === undefined) return false;
    this.#slotOf.delete(url);
    this.#urls[slot] = null;
    const waiting = this.#pending.indexOf(slot);
    if (waiting >= 0) {
      this.#pending.splice(waiting, 1);
    } else {
      // Compact in place before the slot can be reused by another URL.
      let j = 0;
      for (let i = 0; i < this.#pos.length; i++) {
        if (this.#slot[i] === slot) continue;
        this.#pos[j] = this.#pos[i];
        this.#slot[j++] = this.#slot[i];
      }
      this.#pos = this.#pos.slice(0, j);
      this.#slot = this.#slot.slice(0, j);
    }
    this.#free.push(slot);
    return true;
  }

  /** The first URL clockwise from `key`'s position that `accept` takes, or null. */
  lookup(key: string, accept: (url: string) => boolean): string | null {
    const slot = this.lookupHash(hash53(key), (s) => accept(this.#urls[s]!));
    return slot < 0 ? null : this.#urls[slot];
  }

  /**
   * The first slot clockwise from position `h` (a `hash53` value) that `accept` takes, each
   * URL tried once; -1 when none does. O(log ring) to find the start.
   */
  lookupHash(h: number, accept: (slot: number) => boolean): number {
    this.#merge();
    const pos = this.#pos;
    const n = pos.length;
    if (n === 0) return -1;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pos[mid] < h) lo = mid + 1;
      else hi = mid;
    }
    if (++this.#epoch === 0xffffffff) {
      this.#seen.fill(0);
      this.#epoch = 1;
    }
    const epoch = this.#epoch;
    const seen = this.#seen;
    const members = this.#slotOf.size;
    let tried = 0;
    for (let k = 0, i = lo === n ? 0 : lo; k < n; k++, i = i + 1 === n ? 0 : i + 1) {
      const slot = this.#slot[i];
      if (seen[slot] === epoch) continue;
      seen[slot] = epoch;
      if (accept(slot)) return slot;
      if (++tried === members) break;
    }
    return -1;
  }

  /** Places pending URLs' nodes: sort the new nodes, merge with the ring (O(ring + k log k)). */
  #merge(): void {
    if (this.#pending.length === 0) return;
    const urls = this.#urls;
    const add: { p: number; s: number }[] = [];
    for (const s of this.#pending) {
      for (let i = 0; i < VIRTUAL_NODES; i++) add.push({ p: hash53(`${urls[s]}#${i}`), s });
    }
    this.#pending = [];
    // Ties (vanishingly rare at 53 bits) break by URL, so the ring does not depend on the order
    // in which workers were seen.
    const before = (p1: number, s1: number, p2: number, s2: number) =>
      p1 < p2 || (p1 === p2 && urls[s1]! < urls[s2]!);
    add.sort((x, y) => before(x.p, x.s, y.p, y.s) ? -1 : before(y.p, y.s, x.p, x.s) ? 1 : 0);
    const oldPos = this.#pos;
    const oldSlot = this.#slot;
    const pos = new Float64Array(oldPos.length + add.length);
    const slot = new Int32Array(pos.length);
    let i = 0;
    let j = 0;
    for (let k = 0; k < pos.length; k++) {
      if (
        j >= add.length || (i < oldPos.length && before(oldPos[i], oldSlot[i], add[j].p, add[j].s))
      ) {
        pos[k] = oldPos[i];
        slot[k] = oldSlot[i++];
      } else {
        pos[k] = add[j].p;
        slot[k] = add[j++].s;
      }
    }
    this.#pos = pos;
    this.#slot = slot;
    if (this.#seen.length < urls.length) {
      const seen = new Uint32Array(Math.max(16, urls.length * 2));
      seen.set(this.#seen);
      this.#seen = seen;
    }
  }
}

/** Seqs above this are not cached (bounds the cache array; such workers take the map path). */
const MAX_CACHED_SEQ = 1 << 20;

/**
 * A ring of every worker URL a policy has seen, restricted per request to the current
 * candidates: `mark(candidates)` then `owner(hash)` as often as needed for that request.
 */
export class CandidateRing {
  /** The underlying ring (exposed for tests and diagnostics). */
  readonly ring = new HashRing();
  readonly #idUrl = new Map<string, string>();
  #mark = new Uint32Array(16);
  #epoch = 0;
  #bySlot: (WorkerView | undefined)[] = [];
  /** Worker seq → ring slot + 1 (0 = unknown); a cache validated against the slot's URL. */
  #seqSlot = new Int32Array(64);
  readonly #accept = (slot: number) => this.#mark[slot] === this.#epoch;

  /** Makes `candidates` the accepted set, adding URLs never seen before to the ring. */
  mark(candidates: readonly WorkerView[]): void {
    if (++this.#epoch === 0xffffffff) {
      this.#mark.fill(0);
      this.#epoch = 1;
    }
    for (const c of candidates) {
      // Fast path: the slot cached for this worker's seq, if it still holds the same URL.
      let slot = c.seq < this.#seqSlot.length ? this.#seqSlot[c.seq] - 1 : -1;
      if (slot < 0 || this.ring.urlOf(slot) !== c.url) slot = this.#slotFor(c);
      this.#mark[slot] = this.#epoch;
      this.#bySlot[slot] = c;
    }
  }

  /** Finds or adds `c`'s URL, caching its slot under `c.seq`. */
  #slotFor(c: WorkerView): number {
    let slot = this.ring.slotOf(c.url);
    if (slot < 0) {
      slot = this.ring.add(c.url);
      this.#idUrl.set(c.id, c.url);
      if (slot >= this.#mark.length) {
        const grown = new Uint32Array(Math.max(slot + 1, this.#mark.length * 2));
        grown.set(this.#mark);
        this.#mark = grown;
      }
    }
    if (c.seq >= 0 && c.seq < MAX_CACHED_SEQ) {
      if (c.seq >= this.#seqSlot.length) {
        const grown = new Int32Array(Math.max(c.seq + 1, this.#seqSlot.length * 2));
        grown.set(this.#seqSlot);
        this.#seqSlot = grown;
      }
      this.#seqSlot[c.seq] = slot + 1;
    }
    return slot;
  }

  /** The marked candidate owning ring position `h` (first clockwise), or null when none is. */
  owner<W extends WorkerView>(h: number): W | null {
    const slot = this.ring.lookupHash(h, this.#accept);
    return slot < 0 ? null : this.#bySlot[slot] as W;
  }

  /**
   * Takes worker `id`'s URL off the ring. A URL shared with a worker still present comes back
   * on that worker's next sighting, so the ring heals itself.
   */
  remove(id: string): void {
    const url = this.#idUrl.get(id);
    if (url === undefined) return;
    this.#idUrl.delete(id);
    const slot = this.ring.slotOf(url);
    if (slot >= 0) this.#bySlot[slot] = undefined;
    this.ring.remove(url);
  }
}
