/**
 * The prompts of a trace's requests (`trace.ts`): each block id gets a text of its own, exactly
 * 512 simulated tokens of `words` seeded by the run's seed and the id; a prompt is its blocks'
 * texts concatenated, the last cut at `input_length` tokens. Requests that share leading block
 * ids therefore share exactly that leading text, token for token: a block's text starts with a
 * space and ends inside a word, so the simulated tokenizer (`simTokens`: whitespace runs, word
 * chunks of at most 4 characters) cuts a concatenation into the blocks' own tokens and a prompt
 * has exactly `input_length` of them (the chat template adds its few role markers).
 *
 * With `charsPerToken` (the workers' `--chars-per-token`), tokens are `RatioTokenizer`'s: a block
 * is 512 of its pieces, the last one ended by its rule rather than by the text, and a prompt's
 * last block is cut after `input_length` − 512 × (blocks − 1) pieces. In a prompt, a block's
 * first piece or two may differ from its pieces alone (the cut looks 8 characters back, into
 * the block before) before the cuts line up again, so a prompt holds `input_length` tokens
 * give or take one a block.
 *
 * Block texts are kept in a least-recently-used map of bounded size, since traces repeat blocks
 * (the default 16,384 blocks hold about 18 MB of text).
 */

import { seededRandom } from "../../lib/core/clock.ts";
import { TRACE_BLOCK_TOKENS, type TraceRequest } from "./trace.ts";
import { mix, ratioTokenizer, words } from "./workload.ts";

/** Block texts kept by default. */
export const DEFAULT_CACHED_BLOCKS = 16_384;

/** One simulated token: a whitespace run or a word chunk of up to 4 characters. */
const PIECE = /\s+|\S{1,4}/g;

/**
 * The prefix of `text` holding its first `tokens` simulated tokens (all of it when shorter), of
 * `RatioTokenizer` when `charsPerToken` is given.
 */
export function cutTokens(
  text: string,
  tokens: number,
  charsPerToken: number | null = null,
): string {
  if (tokens <= 0) return "";
  if (charsPerToken !== null) {
    return ratioTokenizer(charsPerToken).tokenizeWithPieces(text).pieces.slice(0, tokens).join("");
  }
  let n = 0;
  for (const m of text.matchAll(PIECE)) {
    if (++n === tokens) return text.slice(0, m.index + m[0].length);
  }
  return text;
}

/**
 * Block `id`'s text under `seed`: 512 simulated tokens, a space first, a word chunk last; with
 * `charsPerToken`, 512 `RatioTokenizer` pieces, a space first.
 */
export function blockText(seed: number, id: number, charsPerToken: number | null = null): string {
  const random = seededRandom(mix(seed, 0xb10c, id));
  if (charsPerToken !== null) {
    // A few tokens more than needed, so that the 512th piece is ended by the rule, not the text.
    const text = " " + words(random, TRACE_BLOCK_TOKENS + 4, "", charsPerToken);
    return cutTokens(text, TRACE_BLOCK_TOKENS, charsPerToken);
  }
  const text = cutTokens(" " + words(random, TRACE_BLOCK_TOKENS), TRACE_BLOCK_TOKENS);
  if (!/\s$/.test(text)) return text;
  // The 512th token is a space, which would merge with the next block's leading one. End on a
  // word instead: pad the last word's last chunk to 4 characters and start one more chunk.
  const body = text.trimEnd();
  const last = body.length - 1 - body.lastIndexOf(" ");
  return body + "x".repeat(4 - (last % 4 || 4) + 1);
}

/** Block texts under one seed, the most recently used ones kept. */
export class BlockTexts {
  readonly #seed: number;
  readonly #max: number;
  readonly #texts = new Map<number, string>();
  /** The workers' `--chars-per-token` the texts are sized for, or null (their default). */
  readonly charsPerToken: number | null;

  /** Texts under `seed`, sized for `charsPerToken` (null: default); at most `maxBlocks` kept. */
  constructor(
    seed: number,
    maxBlocks = DEFAULT_CACHED_BLOCKS,
    charsPerToken: number | null = null,
  ) {
    if (!(maxBlocks >= 1)) throw new RangeError(`maxBlocks must be ≥ 1, got ${maxBlocks}`);
    this.#seed = seed;
    this.#max = maxBlocks;
    this.charsPerToken = charsPerToken;
  }

  /** Block `id`'s text. */
  text(id: number): string {
    let t = this.#texts.get(id);
    if (t !== undefined) {
      this.#texts.delete(id); // re-inserted below: the map's order is the recency order
    } else {
      t = blockText(this.#seed, id, this.charsPerToken);
      if (this.#texts.size >= this.#max) this.#texts.delete(this.#texts.keys().next().value!);
    }
    this.#texts.set(id, t);
    return t;
  }

  /** Texts kept now. */
  get size(): number {
    return this.#texts.size;
  }
}

/**
 * Block texts for `requests`, every one of their blocks built now and kept: each target then
 * reads its prompts from memory (43 ms for the 1,631 requests of the trace at 5.5×) instead of
 * building them while it replays (1.5 s of the client's CPU a target: the default cache thrashes
 * on that window's 28,510 distinct blocks).
 */
export function warmBlockTexts(
  seed: number,
  requests: readonly TraceRequest[],
  charsPerToken: number | null = null,
): BlockTexts {
  const ids = new Set<number>();
  for (const r of requests) for (const id of r.hashIds) ids.add(id);
  const blocks = new BlockTexts(seed, Math.max(DEFAULT_CACHED_BLOCKS, ids.size), charsPerToken);
  for (const id of ids) blocks.text(id);
  return blocks;
}

/** The prompt of `r`: its blocks' texts, the last cut so that it holds `inputLength` tokens. */
export function tracePrompt(blocks: BlockTexts, r: TraceRequest): string {
  const ids = r.hashIds;
  const parts = ids.slice(0, -1).map((id) => blocks.text(id));
  const lastTokens = r.inputLength - TRACE_BLOCK_TOKENS * (ids.length - 1);
  parts.push(cutTokens(blocks.text(ids[ids.length - 1]), lastTokens, blocks.charsPerToken));
  return parts.join("");
}
