/**
 * The simulated engine's KV pool: a prefix cache of fixed-size token blocks plus the tokens
 * reserved by running requests, against one capacity in tokens.
 *
 * Each full block is keyed by a rolling hash over all tokens up to its end, so a key names the
 * whole prefix and a lookup walks keys from the start: a prompt's cached length is the run of
 * leading keys present, times the block size. A block is pinned (reference-counted) while a
 * running request uses it and is never evicted then.
 *
 * Eviction order: least recently used unpinned block first. The LRU order is the insertion order
 * of `#lru` (a touch re-inserts at the end, the same order a monotonic counter would give), and
 * a block enters it only when its last pin goes. `unpin` releases a chain leaf first, so a prefix
 * is always more recent than its extensions and LRU eviction takes leaves first, like sglang's
 * radix cache: a live suffix is never orphaned by evicting its parent.
 *
 * Known gap: keys are 53-bit hashes, so two different prefixes collide with odds of about
 * 2^-53 per pair; the engine would then report a false hit.
 */

/** A change to the pool's blocks, as an engine publishes it (its block keys are its hashes). */
export type KvBlockEvent =
  | {
    /** Blocks created in order under `parent` (null: from the start of a prompt). */
    type: "stored";
    keys: number[];
    parent: number | null;
    /** The blocks' tokens, `keys.length` × the block size, in order. */
    tokens: number[];
  }
  | { type: "removed"; keys: number[] }
  | { type: "cleared" };

/** The options of a KV pool. */
export interface KvCacheOptions {
  /** Tokens per block (the engine's `blockSize`, default 16). */
  blockSize: number;
  /** Capacity in tokens, blocks and reservations together (the engine's `kvTokens`, 65536). */
  capacityTokens: number;
  /** Told of every block stored, evicted or flushed (default: nobody). */
  onEvent?: (e: KvBlockEvent) => void;
}

/** Block counts for stats. */
export interface KvCacheCounts {
  /** Blocks resident. */
  blocks: number;
  /** Of those, pinned by a running request. */
  pinnedBlocks: number;
  /** Blocks created since start. */
  insertedBlocks: number;
  /** Blocks evicted to make room since start (flushes not included). */
  evictedBlocks: number;
}

/**
 * Rolling keys of the first `count` full blocks of `tokens` (default: all full blocks). Two
 * FNV-style 32-bit hashes run over the token ids; a key joins 32 bits of one and 21 of the
 * other into a safe integer.
 */
export function blockKeys(
  tokens: readonly number[],
  blockSize: number,
  count = Math.floor(tokens.length / blockSize),
): number[] {
  const keys: number[] = [];
  let a = 0x811c9dc5;
  let b = 0x2f6b3a1d;
  for (let i = 0, end = count * blockSize; i < end; i++) {
    const t = tokens[i] | 0;
    a = Math.imul(a ^ (t & 0xffff), 0x01000193);
    a = Math.imul(a ^ (t >>> 16), 0x01000193);
    b = Math.imul(b ^ t, 0x5bd1e995);
    b ^= b >>> 15;
    if ((i + 1) % blockSize === 0) keys.push((a >>> 0) * 0x200000 + (b >>> 11));
  }
  return keys;
}

/** A finite KV pool of prefix-cache blocks and per-request reservations. */
export class KvCache {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Capacity in tokens. */
  readonly capacityTokens: number;
  /** Every resident block: key → number of pins. */
  #refs = new Map<number, number>();
  /** Unpinned blocks, least recently used first. */
  #lru = new Set<number>();
  #reserved = 0;
  #inserted = 0;
  #evicted = 0;
  readonly #onEvent: ((e: KvBlockEvent) => void) | undefined;

  /** An empty pool. */
  constructor(opts: KvCacheOptions) {
    this.blockSize = opts.blockSize;
    this.capacityTokens = opts.capacityTokens;
    this.#onEvent = opts.onEvent;
  }

  /** Tokens held in resident blocks. */
  get blockTokens(): number {
    return this.#refs.size * this.blockSize;
  }

  /** Tokens reserved by running requests beyond their pinned blocks. */
  get reservedTokens(): number {
    return this.#reserved;
  }

  /** Capacity left without evicting; negative after a forced oversized reservation. */
  get freeTokens(): number {
    return this.capacityTokens - this.blockTokens - this.#reserved;
  }

  /** Tokens in unpinned blocks, which eviction could free. */
  get evictableTokens(): number {
    return this.#lru.size * this.blockSize;
  }

  /** Keys of the full blocks of `tokens`. */
  keys(tokens: readonly number[]): number[] {
    return blockKeys(tokens, this.blockSize);
  }

  /** How many of the first `limit` keys are resident in an unbroken run from the start. */
  matchKeys(keys: readonly number[], limit = keys.length): number {
    let n = 0;
    while (n < limit && this.#refs.has(keys[n])) n++;
    return n;
  }

  /** Leading tokens of `tokens` covered by resident blocks; changes nothing. */
  match(tokens: readonly number[]): number {
    return this.matchKeys(this.keys(tokens)) * this.blockSize;
  }

  /**
   * Whether `tokens` could be reserved after evicting, without evicting the first `blocks` keys
   * of `prefix` (the blocks the reserving request is about to pin).
   */
  fits(tokens: number, prefix: readonly number[] = [], blocks = 0): boolean {
    let protectedTokens = 0;
    for (let i = 0; i < blocks; i++) {
      if (this.#refs.get(prefix[i]) === 0) protectedTokens += this.blockSize;
    }
    return this.freeTokens + this.evictableTokens - protectedTokens >= tokens;
  }

  /**
   * Reserves `tokens`, evicting LRU blocks as needed. Returns false (reserving nothing) if they
   * do not fit; with `force` reserves anyway (an empty engine admits an oversized prompt).
   */
  reserve(tokens: number, force = false): boolean {
    if (this.freeTokens < tokens) this.evict(tokens - this.freeTokens);
    if (this.freeTokens < tokens && !force) return false;
    this.#reserved += tokens;
    return true;
  }

  /** Returns `tokens` of a reservation to the pool. */
  unreserve(tokens: number): void {
    this.#reserved = Math.max(0, this.#reserved - tokens);
  }

  /**
   * Pins `keys[from..to)` (the block keys of `tokens`), creating missing blocks (evicting LRU
   * blocks for room). Stops at the first block it cannot make room for and returns the index
   * reached; the caller must already hold pins on `keys[0..from)`, which is what keeps them from
   * being evicted here. New blocks are reported as stored, each run under its parent.
   */
  pin(keys: readonly number[], from: number, to: number, tokens: readonly number[]): number {
    let run = -1; // first new block of the run being created
    const report = (end: number) => {
      if (run < 0 || !this.#onEvent) return (run = -1);
      const bs = this.blockSize;
      this.#onEvent({
        type: "stored",
        keys: keys.slice(run, end),
        parent: run === 0 ? null : keys[run - 1],
        tokens: tokens.slice(run * bs, end * bs),
      });
      run = -1;
    };
    for (let i = from; i < to; i++) {
      const key = keys[i];
      const refs = this.#refs.get(key);
      if (refs !== undefined) {
        report(i);
        if (refs === 0) this.#lru.delete(key);
        this.#refs.set(key, refs + 1);
        continue;
      }
      if (this.freeTokens < this.blockSize) {
        report(i); // its parent may be evicted next: report what exists first
        this.evict(this.blockSize - this.freeTokens);
      }
      if (this.freeTokens < this.blockSize) {
        report(i);
        return i;
      }
      this.#refs.set(key, 1);
      this.#inserted++;
      if (run < 0) run = i;
    }
    report(Math.max(from, to));
    return Math.max(from, to);
  }

  /** Drops one pin from each of `keys[0..count)`, leaf first, so parents end up more recent. */
  unpin(keys: readonly number[], count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      const refs = this.#refs.get(keys[i]);
      if (refs === undefined || refs === 0) throw new Error(`block ${keys[i]} is not pinned`);
      this.#refs.set(keys[i], refs - 1);
      if (refs === 1) this.#lru.add(keys[i]);
    }
  }

  /** Adds the full blocks of `tokens` unpinned (touching those present); returns tokens cached. */
  insert(tokens: readonly number[]): number {
    const keys = this.keys(tokens);
    const n = this.pin(keys, 0, keys.length, tokens);
    this.unpin(keys, n);
    return n * this.blockSize;
  }

  /** Evicts LRU unpinned blocks until `tokens` are freed or none is left; returns tokens freed. */
  evict(tokens: number): number {
    let freed = 0;
    const gone: number[] = [];
    for (const key of this.#lru) {
      if (freed >= tokens) break;
      this.#lru.delete(key);
      this.#refs.delete(key);
      this.#evicted++;
      gone.push(key);
      freed += this.blockSize;
    }
    if (gone.length > 0) this.#onEvent?.({ type: "removed", keys: gone });
    return freed;
  }

  /** Drops every unpinned block; returns how many (reported as a clear when none is left). */
  flush(): number {
    const n = this.#lru.size;
    const gone = [...this.#lru];
    for (const key of gone) this.#refs.delete(key);
    this.#lru.clear();
    if (n > 0 || this.#refs.size === 0) {
      this.#onEvent?.(
        this.#refs.size === 0 ? { type: "cleared" } : { type: "removed", keys: gone },
      );
    }
    return n;
  }

  /** Block counts. */
  counts(): KvCacheCounts {
    return {
      blocks: this.#refs.size,
      pinnedBlocks: this.#refs.size - this.#lru.size,
      insertedBlocks: this.#inserted,
      evictedBlocks: this.#evicted,
    };
  }
}
