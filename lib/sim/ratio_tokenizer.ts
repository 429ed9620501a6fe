/**
 * The simulated worker's tokenizer at a chosen mean of N characters per token
 * (`--chars-per-token N`): text in, token ids out, and generated text that re-tokenizes to the
 * ids it was generated as. The default tokenizer (`tokenizer.ts`) gives ~2.3 characters per token
 * on the routing benchmark's text, and the gateway assumes 4: this one lets the engine differ.
 *
 * Pieces: a ChatML marker such as `<|im_start|>` is one token; the text between markers is cut by
 * `PieceCutter` (content-defined: a hash of the last 8 characters, a minimum and a cap around N,
 * a newline ends a piece), so pieces vary in length, may span spaces, and two texts with a common
 * prefix share every piece that ends inside it. Ids are `pieceId` (FNV-1a mod VOCAB_SIZE), as in
 * the default tokenizer.
 *
 * Generated text: seeded words of a few syllables between single spaces, cut by the same rule
 * from the start of a line. Sent back as an assistant message, the reply follows the template's
 * `assistant\n` (a fresh line), so it is cut into the same pieces and the next turn's prompt hits
 * the cache on the reply too (the engine caches ids, so text that re-tokenized otherwise would
 * only miss, never count as cached). Known gaps: a prompt that does not end in a newline
 * (completions, /generate) joins its last piece with the first generated one on re-tokenizing, as
 * the default tokenizer does; ids of distinct pieces may collide; measured on the routing
 * benchmark's text the mean is 1-3 % under N (a message's last piece is cut short by its end).
 */

import { PieceCutter, type PieceShape, pieceShape } from "./piece_cutter.ts";
import { contextState, type GeneratedToken, pieceId, type SimTokenizer } from "./tokenizer.ts";

const MARKER = /<\|[a-z_]+\|>/g;

/** Syllables of generated words. */
const SYLLABLES = ["ta", "ne", "ko", "ri", "sa", "mu", "len", "dor", "vi", "pa", "shu", "gel"];

/** A 32-bit integer mix (murmur3's finaliser) of `seed` and the draw number `k`. */
function draw(seed: number, k: number): number {
  let h = (seed ^ Math.imul(k + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Counts the tokens of a text fed in parts (without markers), without re-reading it. */
export class TokenCounter {
  readonly #cutter: PieceCutter;
  #ended = 0;

  /** A count at zero, at the start of a line. */
  constructor(shape: PieceShape) {
    this.#cutter = new PieceCutter(shape);
  }

  /** Appends `text`. */
  add(text: string): void {
    for (let i = 0; i < text.length; i++) if (this.#cutter.push(text.charCodeAt(i))) this.#ended++;
  }

  /** Tokens of everything added: `tokenize` of it all has this many. */
  get tokens(): number {
    return this.#ended + (this.#cutter.open > 0 ? 1 : 0);
  }
}

/** A tokenizer whose pieces average `charsPerToken` characters. */
export class RatioTokenizer implements SimTokenizer {
  readonly #shape: PieceShape;

  /** RangeError unless `charsPerToken` is in 1..1024. */
  constructor(charsPerToken: number) {
    this.#shape = pieceShape(charsPerToken);
  }

  /** The mean characters per token aimed at. */
  get charsPerToken(): number {
    return this.#shape.charsPerToken;
  }

  /** Splits `text` into pieces and their ids, in order. */
  tokenizeWithPieces(text: string): { ids: number[]; pieces: string[] } {
    const pieces: string[] = [];
    let from = 0;
    for (const m of text.matchAll(MARKER)) {
      this.#cut(text, from, m.index, pieces);
      pieces.push(m[0]);
      from = m.index + m[0].length;
    }
    this.#cut(text, from, text.length, pieces);
    return { ids: pieces.map(pieceId), pieces };
  }

  /** Token ids of `text`. */
  tokenize(text: string): number[] {
    return this.tokenizeWithPieces(text).ids;
  }

  /** A counter of the tokens of text without markers, fed in parts. */
  counter(): TokenCounter {
    return new TokenCounter(this.#shape);
  }

  /**
   * Generated tokens after `context`: words seeded by the context (and `sampling`, when given),
   * cut as `tokenize` would cut them. Known gap: a token is not a function of the tokens before
   * it, so a stream continued from a cut does not go on as the unbroken one would (the word
   * tokenizer's does).
   */
  generator(context: readonly number[], sampling?: number): () => GeneratedToken {
    const seed = contextState(context, sampling);
    const cutter = new PieceCutter(this.#shape);
    let k = 0;
    let word = "";
    let at = 0;
    const nextChar = (): number => {
      if (at === word.length) {
        const syllables = 1 + (draw(seed, k++) % 3);
        word = k === 1 ? "" : " ";
        for (let i = 0; i < syllables; i++) word += SYLLABLES[draw(seed, k++) % SYLLABLES.length];
        at = 0;
      }
      return word.charCodeAt(at++);
    };
    return () => {
      let piece = "";
      for (;;) {
        const c = nextChar();
        piece += String.fromCharCode(c);
        if (cutter.push(c)) return { id: pieceId(piece), piece };
      }
    };
  }

  /** Pushes the pieces of `text[from, to)`, a stretch between markers, onto `out`. */
  #cut(text: string, from: number, to: number, out: string[]): void {
    const cutter = new PieceCutter(this.#shape);
    let start = from;
    for (let i = from; i < to; i++) {
      if (cutter.push(text.charCodeAt(i))) {
        out.push(text.slice(start, i + 1));
        start = i + 1;
      }
    }
    if (start < to) out.push(text.slice(start, to));
  }
}
