/**
 * A two-level tokenizer cache, so repeated conversation prefixes are not re-encoded (SMG's
 * design: an exact-match level and a prefix level at special-token boundaries):
 *
 * - L0: the whole text → its ids, for the same prompt sent again (retries, identical requests);
 *   least recently used entries go first.
 * - L1: a prefix of the text that ends where an added token (`<|im_start|>`, ...) begins → the
 *   ids of that prefix. Tokenizers split added tokens out before anything else, so the text on
 *   either side of such a boundary is encoded independently and `ids(prefix) + ids(rest)` is
 *   exactly `ids(text)`. A conversation's next turn repeats the previous prompt up to its last
 *   boundary (the opening of the assistant turn), so only the new turn is encoded. Prefixes are
 *   keyed by two 32-bit hashes and their length (one pass over the text); the last few boundaries
 *   of every encoded text are stored, bounded in total tokens, least recently used first out.
 *
 * L1 is used only without added special tokens (chat prompts: the template writes them) and only
 * when no added token strips whitespace to its left (which would make the split inexact).
 */

import type { GatewayTokenizer } from "./tokenizer.ts";

/** What a cache needs of a tokenizer. */
export type Encoder = Pick<
  GatewayTokenizer,
  "encode" | "addedTokens" | "addedTokensStripLeft"
>;

/** Texts a lookup left to encode, and what completes the ids once they are. */
interface Plan {
  parts: string[];
  addSpecial: boolean;
  finish(encoded: number[][]): number[];
}

/** Sizes of the two levels. */
export interface CacheOptions {
  /** Whole texts kept (default 1,024). */
  l0Entries?: number;
  /** Tokens kept in whole-text entries, all together (default 1 Mi); longer texts skip L0. */
  l0Tokens?: number;
  /** Tokens kept in prefix entries, all together (default 4 Mi). */
  l1Tokens?: number;
  /** Boundaries stored per encoded text, the last ones (default 4). */
  boundariesPerText?: number;
}

/** Hit counters. */
export interface CacheStats {
  l0Hits: number;
  l1Hits: number;
  misses: number;
  /** Tokens taken from L1 instead of encoded. */
  tokensReused: number;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Encodes through the two cache levels; results equal `encoder.encode`. */
export class CachedEncoder {
  readonly stats: CacheStats = { l0Hits: 0, l1Hits: 0, misses: 0, tokensReused: 0 };
  readonly #enc: Encoder;
  readonly #l0 = new Map<string, Uint32Array>();
  #l0Size = 0;
  readonly #l0Tokens: number;
  readonly #l1 = new Map<string, Uint32Array>();
  #l1Size = 0;
  readonly #l0Max: number;
  readonly #l1Max: number;
  readonly #perText: number;
  readonly #boundary: RegExp | null;

  constructor(encoder: Encoder, o: CacheOptions = {}) {
    this.#enc = encoder;
    this.#l0Max = o.l0Entries ?? 1024;
    this.#l0Tokens = o.l0Tokens ?? 1024 * 1024;
    this.#l1Max = o.l1Tokens ?? 4 * 1024 * 1024;
    this.#perText = o.boundariesPerText ?? 4;
    const added = encoder.addedTokens.filter((t) => t.length > 0);
    this.#boundary = added.length > 0 && !encoder.addedTokensStripLeft
      ? new RegExp(added.map(escape).join("|"), "g")
      : null;
  }

  /** Token ids of `text` (see `GatewayTokenizer.encode`); do not modify the result. */
  encode(text: string, addSpecial: boolean): number[] {
    const p = this.#plan(text, addSpecial);
    if (Array.isArray(p)) return p;
    return p.finish(p.parts.map((part) => this.#enc.encode(part, p.addSpecial)));
  }

  /**
   * `encode`, with what is not cached encoded by `many` (each part on its own, as
   * `encode(part, addSpecial)` would): a tokenizer pool's threads, say.
   */
  async encodeWith(
    text: string,
    addSpecial: boolean,
    many: (parts: string[], addSpecial: boolean) => Promise<number[][]>,
  ): Promise<number[]> {
    const p = this.#plan(text, addSpecial);
    if (Array.isArray(p)) return p;
    return p.finish(await many(p.parts, p.addSpecial));
  }

  /**
   * How many characters of `text` a lookup would still send to the encoder: 0 when it is cached
   * whole, the part past its longest cached prefix otherwise (all of it on a miss). Reads only:
   * neither the counters nor the recency order change.
   */
  pendingChars(text: string, addSpecial: boolean): number {
    if (this.#l0.has(addSpecial ? `1${text}` : `0${text}`)) return 0;
    if (addSpecial || !this.#boundary) return text.length;
    const re = this.#boundary;
    const cuts: number[] = [];
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m.index > 0) cuts.push(m.index);
    }
    if (cuts.length === 0) return text.length;
    const keys = prefixKeys(text, cuts);
    for (let i = cuts.length - 1; i >= 0; i--) {
      if (this.#l1.has(keys[i])) return text.length - cuts[i];
    }
    return text.length;
  }

  /**
   * The ids of `text` from the cache, or the parts left to encode and what completes the ids
   * (and the cache) once they are: the whole text on a miss, or the segments past the longest
   * cached prefix.
   */
  #plan(text: string, addSpecial: boolean): number[] | Plan {
    const key = addSpecial ? `1${text}` : `0${text}`;
    const hit = this.#l0.get(key);
    if (hit) {
      this.#l0.delete(key);
      this.#l0.set(key, hit);
      this.stats.l0Hits++;
      return Array.from(hit);
    }
    const keep = (ids: number[]) => {
      this.#keep(key, ids);
      return ids;
    };
    if (addSpecial || !this.#boundary) return this.#miss(text, addSpecial, keep);
    return this.#byPrefix(text, keep);
  }

  /**
   * Keeps `ids` as the whole text's entry if it is small enough (once: two lookups of the same
   * text may both have missed while their parts were encoded elsewhere).
   */
  #keep(key: string, ids: number[]): void {
    if (ids.length > this.#l0Tokens / 8 || this.#l0.has(key)) return;
    this.#l0.set(key, Uint32Array.from(ids));
    this.#l0Size += ids.length;
    while (this.#l0.size > this.#l0Max || this.#l0Size > this.#l0Tokens) {
      const [k, v] = this.#l0.entries().next().value!;
      this.#l0.delete(k);
      this.#l0Size -= v.length;
    }
  }

  #miss(text: string, addSpecial: boolean, keep: (ids: number[]) => number[]): Plan {
    this.stats.misses++;
    return { parts: [text], addSpecial, finish: ([ids]) => keep(ids) };
  }

  /** Through L1: the longest cached prefix at a boundary, then the rest segment by segment. */
  #byPrefix(text: string, keep: (ids: number[]) => number[]): Plan {
    const re = this.#boundary!;
    const cuts: number[] = [];
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m.index > 0) cuts.push(m.index);
    }
    if (cuts.length === 0) return this.#miss(text, false, keep);
    const keys = prefixKeys(text, cuts);
    let from = -1;
    let prefix: number[] = [];
    for (let i = cuts.length - 1; i >= 0; i--) {
      const hit = this.#l1.get(keys[i]);
      if (hit) {
        this.#l1.delete(keys[i]);
        this.#l1.set(keys[i], hit);
        prefix = Array.from(hit);
        from = i;
        break;
      }
    }
    if (from >= 0) {
      this.stats.l1Hits++;
      this.stats.tokensReused += prefix.length;
    } else this.stats.misses++;
    const parts: string[] = [];
    let at = from >= 0 ? cuts[from] : 0;
    for (let i = from + 1; i <= cuts.length; i++) {
      const end = i < cuts.length ? cuts[i] : text.length;
      parts.push(text.slice(at, end));
      at = end;
    }
    const storeFrom = cuts.length - this.#perText;
    return {
      parts,
      addSpecial: false,
      finish: (encoded) => {
        const ids = prefix;
        encoded.forEach((part, k) => {
          for (const id of part) ids.push(id);
          const i = from + 1 + k;
          if (i < cuts.length && i >= storeFrom) this.#store(keys[i], ids);
        });
        return keep(ids);
      },
    };
  }

  #store(key: string, ids: number[]): void {
    if (ids.length > this.#l1Max || this.#l1.has(key)) return;
    this.#l1.set(key, Uint32Array.from(ids));
    this.#l1Size += ids.length;
    while (this.#l1Size > this.#l1Max) {
      const [k, v] = this.#l1.entries().next().value!;
      this.#l1.delete(k);
      this.#l1Size -= v.length;
    }
  }
}

// Hash seeds drawn per process, so colliding prefixes cannot be computed offline.
const SEEDS = crypto.getRandomValues(new Uint32Array(2));

/** Keys of `text`'s prefixes ending at each cut: two seeded FNV-style hashes and the length. */
function prefixKeys(text: string, cuts: readonly number[]): string[] {
  const keys: string[] = [];
  let h1 = 0x811c9dc5 ^ SEEDS[0];
  let h2 = 0x9747b28c ^ SEEDS[1];
  let c = 0;
  for (let i = 0; i < text.length && c < cuts.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 0x01000193);
    h2 = Math.imul(h2 ^ ch, 0x5bd1e995) ^ (h2 >>> 15);
    if (i + 1 === cuts[c]) {
      keys.push(`${h1 >>> 0}:${h2 >>> 0}:${i + 1}`);
      c++;
    }
  }
  return keys;
}
