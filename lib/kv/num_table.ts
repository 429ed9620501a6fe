/**
 * A hash table from numeric keys (positive integers up to 2^53) to columns of numbers, in typed
 * arrays: open addressing, linear probing, deletion by backward shift (no tombstones), doubled
 * when half full. The KV-event index keeps millions of entries that live for minutes; as `Map`s
 * of objects they are millions of heap objects that every young-generation collection copies and
 * every full one marks (measured: scavenges of up to 100 ms on a busy gateway). Here they are
 * a few arrays the collector never looks inside.
 *
 * Each slot holds a key, `f64` numbers (`f64Columns` of them) and `u32Words` 32-bit words; the
 * word count may grow later (`widen`). Key 0 marks an empty slot and cannot be stored.
 */

const MIN_CAPACITY = 16;

/** A numeric-keyed table of numeric columns; see the module comment. */
export class NumTable {
  #keys: Float64Array;
  #f64: Float64Array;
  #u32: Uint32Array;
  #size = 0;
  readonly #f64Columns: number;
  #words: number;

  constructor(f64Columns: number, u32Words: number, capacity = MIN_CAPACITY) {
    this.#f64Columns = f64Columns;
    this.#words = u32Words;
    let cap = MIN_CAPACITY;
    while (cap < capacity) cap *= 2;
    this.#keys = new Float64Array(cap);
    this.#f64 = new Float64Array(cap * f64Columns);
    this.#u32 = new Uint32Array(cap * u32Words);
  }

  /** Keys stored. */
  get size(): number {
    return this.#size;
  }

  /** 32-bit words per slot. */
  get words(): number {
    return this.#words;
  }

  /** The slot of `key`, or -1. */
  find(key: number): number {
    const keys = this.#keys;
    const mask = keys.length - 1;
    for (let i = hash(key) & mask;; i = (i + 1) & mask) {
      const k = keys[i];
      if (k === key) return i;
      if (k === 0) return -1;
    }
  }

  /** The slot of `key`, added (columns zeroed) when absent; `created` says which. */
  insert(key: number): number {
    if (key === 0) throw new Error("NumTable: key 0 is the empty mark");
    if ((this.#size + 1) * 2 > this.#keys.length) this.#resize(this.#keys.length * 2, this.#words);
    const keys = this.#keys;
    const mask = keys.length - 1;
    for (let i = hash(key) & mask;; i = (i + 1) & mask) {
      const k = keys[i];
      if (k === key) {
        this.created = false;
        return i;
      }
      if (k === 0) {
        keys[i] = key;
        this.#size++;
        this.created = true;
        return i;
      }
    }
  }

  /** Whether the last `insert` added its key. */
  created = false;

  /** The key in `slot` (0: empty). */
  keyAt(slot: number): number {
    return this.#keys[slot];
  }

  /** Number `column` of `slot`. */
  f64(slot: number, column = 0): number {
    return this.#f64[slot * this.#f64Columns + column];
  }

  /** Sets number `column` of `slot`. */
  setF64(slot: number, value: number, column = 0): void {
    this.#f64[slot * this.#f64Columns + column] = value;
  }

  /** Every slot's words, `words` a slot (valid until the next insert or `widen`). */
  get u32(): Uint32Array {
    return this.#u32;
  }

  /** Where `slot`'s words start in `u32`. */
  wordsAt(slot: number): number {
    return slot * this.#words;
  }

  /** Removes `key`; whether it was there. */
  delete(key: number): boolean {
    const slot = this.find(key);
    if (slot < 0) return false;
    this.#deleteSlot(slot);
    return true;
  }

  /** Gives every slot `words` 32-bit words (existing words kept, new ones zero). */
  widen(words: number): void {
    if (words > this.#words) this.#resize(this.#keys.length, words);
  }

  /** Every occupied slot (do not insert or delete while iterating). */
  *slots(): IterableIterator<number> {
    const keys = this.#keys;
    for (let i = 0; i < keys.length; i++) if (keys[i] !== 0) yield i;
  }

  /** Removes everything and returns to the smallest capacity. */
  clear(): void {
    this.#keys = new Float64Array(MIN_CAPACITY);
    this.#f64 = new Float64Array(MIN_CAPACITY * this.#f64Columns);
    this.#u32 = new Uint32Array(MIN_CAPACITY * this.#words);
    this.#size = 0;
  }

  #deleteSlot(slot: number): void {
    const keys = this.#keys;
    const mask = keys.length - 1;
    // Backward shift: later entries of the probe run move up into the hole where that keeps
    // them reachable from their home slot.
    let hole = slot;
    for (let i = (slot + 1) & mask; keys[i] !== 0; i = (i + 1) & mask) {
      const home = hash(keys[i]) & mask;
      const reachable = hole <= i ? home <= hole || home > i : home <= hole && home > i;
      if (reachable) {
        this.#move(i, hole);
        hole = i;
      }
    }
    keys[hole] = 0;
    this.#f64.fill(0, hole * this.#f64Columns, (hole + 1) * this.#f64Columns);
    this.#u32.fill(0, hole * this.#words, (hole + 1) * this.#words);
    this.#size--;
  }

  #move(from: number, to: number): void {
    this.#keys[to] = this.#keys[from];
    const c = this.#f64Columns;
    this.#f64.copyWithin(to * c, from * c, (from + 1) * c);
    const w = this.#words;
    this.#u32.copyWithin(to * w, from * w, (from + 1) * w);
  }

  #resize(capacity: number, words: number): void {
    const keys = this.#keys;
    const f64 = this.#f64;
    const u32 = this.#u32;
    const c = this.#f64Columns;
    const w = this.#words;
    this.#keys = new Float64Array(capacity);
    this.#f64 = new Float64Array(capacity * c);
    this.#u32 = new Uint32Array(capacity * words);
    this.#words = words;
    const mask = capacity - 1;
    for (let s = 0; s < keys.length; s++) {
      const key = keys[s];
      if (key === 0) continue;
      let i = hash(key) & mask;
      while (this.#keys[i] !== 0) i = (i + 1) & mask;
      this.#keys[i] = key;
      this.#f64.set(f64.subarray(s * c, (s + 1) * c), i * c);
      this.#u32.set(u32.subarray(s * w, (s + 1) * w), i * words);
    }
  }
}

/** A well-mixed 32-bit hash of a key below 2^53. */
function hash(key: number): number {
  const lo = key >>> 0;
  const hi = (key / 0x100000000) >>> 0;
  let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A number in [1, 2^53) naming `s` (FNV-1a on two lanes): equal strings, equal numbers. */
export function foldString(s: string): number {
  let a = 0x811c9dc5;
  let b = 0x2f6b3a1d;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (a >>> 0) * 0x200000 + (b >>> 11) + 1;
}
