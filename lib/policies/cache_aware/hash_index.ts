/**
 * cache_aware's hash index (`--cache-index hash`): instead of a radix tree, the head of each
 * request is hashed at every configured boundary (`--cache-boundaries`, in tokens; text requests
 * at the model's characters per token held steady, as prefix_hash cuts them — SMG keys only token
 * requests, so plain HTTP chat was pure min-load in this mode), and each (boundary, head hash) remembers up to three
 * holders with their last use. Lookup probes the deepest boundary first; placements unused for
 * `--cache-ttl-secs` expire (lazily on read, and in `sweep`).
 *
 * A head hash is two 32-bit FNV-1a lanes over the units, computed in one pass for all boundaries.
 */

/** Most holders per key; the stalest is dropped for a fourth. */
const MAX_HOLDERS = 3;

interface Holder {
  id: string;
  touched: number;
}

/** One applicable boundary of a request and its head hash. */
export interface HeadKey {
  /** The boundary in tokens. */
  boundary: number;
  /** Map key: boundary and head hash. */
  key: string;
}

/**
 * Head hashes at `boundaries` (ascending) that fit in `units`, deepest first; text at
 * `charsPerToken` characters a token.
 */
export function headKeys(
  units: string | readonly number[],
  boundaries: readonly number[],
  charsPerToken: number,
): HeadKey[] {
  const text = typeof units === "string";
  const scale = text ? charsPerToken : 1;
  const out: HeadKey[] = [];
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193 ^ 0x5bd1e995;
  let pos = 0;
  for (const b of boundaries) {
    const end = Math.round(b * scale);
    if (end > units.length) break;
    for (; pos < end; pos++) {
      const u = text ? (units as string).charCodeAt(pos) : (units as readonly number[])[pos];
      h1 = Math.imul(h1 ^ u, 0x01000193);
      h2 = Math.imul(h2 ^ (u >>> 16) ^ (u << 7), 0x5bd1e995) ^ (h2 >>> 15);
    }
    out.push({ boundary: b, key: `${b}:${h1 >>> 0}:${h2 >>> 0}` });
  }
  return out.reverse();
}

/** Placements of request heads on workers. */
export class HashIndex {
  readonly #ttlMs: number;
  readonly #map = new Map<string, Holder[]>();

  /** Placements expire after `ttlMs` without use. */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** Keys with at least one holder. */
  get size(): number {
    return this.#map.size;
  }

  /**
   * The first key (deepest first) with a live holder accepted by `pick`; `pick` chooses among
   * that key's live holder ids (e.g. the least busy eligible one) or returns null.
   */
  lookup(
    keys: readonly HeadKey[],
    now: number,
    pick: (ids: string[]) => string | null,
  ): HeadKey & { id: string } | null {
    for (const k of keys) {
      const holders = this.#live(k.key, now);
      if (!holders) continue;
      const id = pick(holders.map((h) => h.id));
      if (id !== null) return { ...k, id };
    }
    return null;
  }

  /** Records `id` as a holder at every key, refreshing or replacing the stalest. */
  record(keys: readonly HeadKey[], id: string, now: number): void {
    for (const { key } of keys) {
      const holders = this.#live(key, now) ?? [];
      const mine = holders.find((h) => h.id === id);
      if (mine) mine.touched = now;
      else {
        if (holders.length >= MAX_HOLDERS) {
          holders.sort((a, b) => b.touched - a.touched);
          holders.length = MAX_HOLDERS - 1;
        }
        holders.push({ id, touched: now });
      }
      this.#map.set(key, holders);
    }
  }

  /** Forgets a worker everywhere. */
  removeTenant(id: string): void {
    for (const [key, holders] of this.#map) {
      const left = holders.filter((h) => h.id !== id);
      if (left.length === 0) this.#map.delete(key);
      else if (left.length !== holders.length) this.#map.set(key, left);
    }
  }

  /** Drops expired holders and empty keys; returns the keys left. */
  sweep(now: number): number {
    for (const key of [...this.#map.keys()]) this.#live(key, now);
    return this.#map.size;
  }

  #live(key: string, now: number): Holder[] | null {
    const holders = this.#map.get(key);
    if (!holders) return null;
    const live = holders.filter((h) => now - h.touched <= this.#ttlMs);
    if (live.length === 0) {
      this.#map.delete(key);
      return null;
    }
    if (live.length !== holders.length) this.#map.set(key, live);
    return live;
  }
}

/**
 * The hash mode's pick among `candidates`: the least busy (`leastBusy`) live holder of the
 * deepest of `keys` that has one (`hit`); none when the balance gate vetoes it (`spill`) or no
 * key has a live holder (`miss`), and the caller falls back to the lowest expected wait.
 */
export function pickHolder<W extends { url: string }>(
  index: HashIndex,
  keys: readonly HeadKey[],
  candidates: readonly W[],
  now: number,
  leastBusy: (live: W[]) => W,
  gated: (w: W) => boolean,
): { pick: W | null; branch: "hit" | "spill" | "miss" } {
  const byUrl = new Map(candidates.map((w) => [w.url, w]));
  const found = index.lookup(keys, now, (urls) => {
    const live = urls.map((u) => byUrl.get(u)).filter((w): w is W => w !== undefined);
    return live.length > 0 ? leastBusy(live).url : null;
  });
  const pick = found ? byUrl.get(found.id)! : null;
  if (pick === null) return { pick, branch: "miss" };
  return gated(pick) ? { pick: null, branch: "spill" } : { pick, branch: "hit" };
}
