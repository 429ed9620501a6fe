/**
 * A deterministic tokenizer stand-in for the simulated engine: text in, token ids out, and a
 * small output vocabulary for generated text that survives a round trip (detokenize, then
 * tokenize again gives the same ids), so a conversation that sends the reply back hits the cache.
 *
 * Pieces: a special marker such as `<|im_start|>` is one token, a whitespace run is one token,
 * other text is cut into chunks of at most 4 characters (a lone `<` is its own piece). A piece's
 * id is the FNV-1a 32-bit hash of its UTF-8 bytes mod 100000. Known gaps: ids collide (two
 * pieces may share an id, as a real vocabulary never would); the split is by UTF-16 code unit,
 * so an astral character can be cut in two (each half hashes as a 3-byte CESU-8 sequence).
 *
 * `SimTokenizer` is what the engine and the HTTP server need of a tokenizer; `WORD_TOKENIZER` is
 * this one as such, the default. `ratio_tokenizer.ts` is the other (`--chars-per-token`).
 */

/** One generated token: its id and its text. */
export interface GeneratedToken {
  /** Token id, in [0, VOCAB_SIZE). */
  id: number;
  /** Its text. */
  piece: string;
}

/** A simulated tokenizer: prompt text to ids, and the tokens a request generates. */
export interface SimTokenizer {
  /** Splits `text` into pieces and their ids, in order. */
  tokenizeWithPieces(text: string): { ids: number[]; pieces: string[] };
  /** Token ids of `text`. */
  tokenize(text: string): number[];
  /**
   * The tokens generated after `context` (the prompt's ids), each call the next one: a function
   * of every token before it, as greedy decoding is (`seed`, when given, mixes in a sampling
   * seed). Their text, sent back after a ChatML `assistant\n`, tokenizes to the same ids.
   */
  generator(context: readonly number[], seed?: number): () => GeneratedToken;
}

/** Size of the id space: every id is in [0, VOCAB_SIZE). */
export const VOCAB_SIZE = 100_000;

/** Size of the output vocabulary generated text is drawn from. */
export const OUTPUT_VOCAB_SIZE = 2048;

const PIECE = /<\|[a-z_]+\|>|\s+|[^\s<]{1,4}|</g;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a 32-bit hash of the UTF-8 bytes of `text`, as an unsigned integer. */
export function fnv1a32(text: string): number {
  let h = FNV_OFFSET;
  const byte = (b: number) => (h = Math.imul(h ^ b, FNV_PRIME));
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c < 0x80) {
      byte(c);
      continue;
    }
    if (c < 0x800) {
      byte(0xc0 | (c >> 6));
      byte(0x80 | (c & 63));
      continue;
    }
    const next = text.charCodeAt(i + 1);
    if (c >= 0xd800 && c < 0xdc00 && next >= 0xdc00 && next < 0xe000) {
      c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
      i++;
      byte(0xf0 | (c >> 18));
      byte(0x80 | ((c >> 12) & 63));
    } else {
      byte(0xe0 | (c >> 12));
    }
    byte(0x80 | ((c >> 6) & 63));
    byte(0x80 | (c & 63));
  }
  return h >>> 0;
}

/** The token id of one piece. */
export function pieceId(piece: string): number {
  return fnv1a32(piece) % VOCAB_SIZE;
}

/** Splits `text` into pieces and their ids, in order. */
export function tokenizeWithPieces(text: string): { ids: number[]; pieces: string[] } {
  const pieces = text.match(PIECE) ?? [];
  return { ids: pieces.map(pieceId), pieces };
}

/** Token ids of `text`. */
export function tokenize(text: string): number[] {
  return tokenizeWithPieces(text).ids;
}

/** A 32-bit integer mix (murmur3's finaliser) of `a` and `b`. */
function mix(a: number, b: number): number {
  let h = (a ^ Math.imul(b, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Builds the output vocabulary: distinct lowercase words of 1-4 letters (longer ones likelier,
 * as in real text) whose ids are distinct from each other and from `reserved` (the space and
 * the ChatML markers), so `pieceOf` is a function and never mistakes a marker for a word.
 */
function buildOutputVocab(reserved: number[]): { words: string[]; ids: number[] } {
  const words: string[] = [];
  const ids: number[] = [];
  const seen = new Set<number>(reserved);
  for (let k = 0; words.length < OUTPUT_VOCAB_SIZE; k++) {
    let h = mix(k, 0x5eed);
    const r = h % 10;
    const len = r < 1 ? 1 : r < 3 ? 2 : r < 6 ? 3 : 4;
    let word = "";
    for (let j = 0; j < len; j++) {
      h = mix(h, j);
      word += String.fromCharCode(97 + (h % 26));
    }
    const id = pieceId(word);
    if (seen.has(id)) continue;
    seen.add(id);
    words.push(word);
    ids.push(id);
  }
  return { words, ids };
}

/** The state of a context: a rolling hash of its ids, one `mix` per token. */
export function contextState(ids: readonly number[], seed?: number): number {
  let h = seed === undefined ? 0x811c9dc5 : mix(0x811c9dc5, seed);
  for (const id of ids) h = mix(h, id);
  return h;
}

/** The piece between generated words. */
const SPACE = " ";
const SPACE_ID = pieceId(SPACE);
const OUTPUT = buildOutputVocab(
  [SPACE, "\n", "<|im_start|>", "<|im_end|>", "<|endoftext|>"].map(pieceId),
);
const PIECE_OF = new Map<number, string>([[SPACE_ID, SPACE]]);
OUTPUT.ids.forEach((id, i) => PIECE_OF.set(id, OUTPUT.words[i]));

const IS_WORD = new Set(OUTPUT.ids);

/**
 * The token after a context in state `state` whose last token is `last`: a single space after a
 * generated word, else a word drawn by the state, so the text reads "word word word" and
 * re-tokenizes to the same ids (and a continuation from any cut goes on the same way).
 */
export function nextToken(state: number, last: number | undefined): GeneratedToken {
  if (last !== undefined && IS_WORD.has(last)) return { id: SPACE_ID, piece: SPACE };
  const k = mix(state, 0x5eed) % OUTPUT_VOCAB_SIZE;
  return { id: OUTPUT.ids[k], piece: OUTPUT.words[k] };
}

/** The text of a generated token id; throws a RangeError on an id outside the output vocabulary. */
export function pieceOf(id: number): string {
  const piece = PIECE_OF.get(id);
  if (piece === undefined) throw new RangeError(`token id ${id} is not a generated token`);
  return piece;
}

/** The text of generated token ids; throws a RangeError on an id outside the output vocabulary. */
export function detokenize(ids: readonly number[]): string {
  return ids.map(pieceOf).join("");
}

/** This module's tokenizer as a `SimTokenizer`: the simulated worker's default. */
export const WORD_TOKENIZER: SimTokenizer = {
  tokenizeWithPieces,
  tokenize,
  generator(context, seed) {
    let state = contextState(context, seed);
    let last = context.at(-1);
    return () => {
      const token = nextToken(state, last);
      state = mix(state, token.id);
      last = token.id;
      return token;
    };
  },
};
