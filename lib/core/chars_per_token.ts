/**
 * Characters per token, learned: where the gateway has a prompt's text but not its tokens (HTTP
 * workers, no tokenizer), everything that turns text into tokens (the prefill backlog, the tree's
 * capacity bound, cache_aware's costs and predictions, prefix_hash's and the hash index's cuts,
 * tenant-limit estimates) divides by this one estimate. `DEFAULT_CHARS_PER_TOKEN` (4, English
 * prose) stands until answers arrive; each answer then pairs the routing text's length with the
 * `prompt_tokens` the worker reported (`RatioEstimate.observe`). Real tokenizers range from about
 * 1 character a token (Chinese, Japanese) through 2.5-3.5 (code, JSON) to 8 and more (long
 * identifiers, base64), and the engine also counts its chat template's tokens, so the ratio is
 * measured, never assumed.
 *
 * Robust to outliers (a prompt with an image or a tool schema not in the routing text, a short
 * prompt that is mostly template): the estimate is the token-weighted ratio of the last
 * `WINDOW` samples after trimming those farther than `TRIM` × from their token-weighted median;
 * prompts shorter than `MIN_TOKENS` are not samples. Known gap: within one model a mix of
 * languages gives one blended ratio, right on average and wrong for each.
 */

/** Characters per token until a model's answers say otherwise (English prose; SMG assumes it). */
export const DEFAULT_CHARS_PER_TOKEN = 4;

/** Samples an estimate keeps (the most recent). */
export const WINDOW = 64;

/** Samples before an estimate stands on its own. */
export const MIN_SAMPLES = 4;

/** Prompts with fewer reported tokens are not samples (the chat template dominates them). */
export const MIN_TOKENS = 16;

/** Samples farther than this factor from the median are left out of the mean. */
const TRIM = 1.5;

/** Ratios outside [MIN_RATIO, MAX_RATIO] are not samples (a routing text that is not the prompt). */
const MIN_RATIO = 0.2;
const MAX_RATIO = 64;

/** One estimate of characters per token from (characters, tokens) samples. */
export class RatioEstimate {
  readonly #chars = new Float64Array(WINDOW);
  readonly #tokens = new Float64Array(WINDOW);
  #n = 0;
  #next = 0;
  #value: number | null = null;
  #dirty = false;

  /** Adds one prompt: `chars` characters of routing text that the worker counted as `tokens`. */
  observe(chars: number, tokens: number): boolean {
    if (!(tokens >= MIN_TOKENS) || !(chars > 0)) return false;
    const r = chars / tokens;
    if (!(r >= MIN_RATIO && r <= MAX_RATIO)) return false;
    this.#chars[this.#next] = chars;
    this.#tokens[this.#next] = tokens;
    this.#next = (this.#next + 1) % WINDOW;
    if (this.#n < WINDOW) this.#n++;
    this.#dirty = true;
    return true;
  }

  /** Samples held (at most `WINDOW`). */
  get samples(): number {
    return this.#n;
  }

  /** The estimate, or null before `MIN_SAMPLES` samples. */
  get value(): number | null {
    if (this.#n < MIN_SAMPLES) return null;
    if (this.#dirty) {
      this.#value = trimmedRatio(this.#chars, this.#tokens, this.#n);
      this.#dirty = false;
    }
    return this.#value;
  }
}

/** Σchars ÷ Σtokens over the first `n` samples within `TRIM` × of their weighted median. */
function trimmedRatio(chars: Float64Array, tokens: Float64Array, n: number): number {
  const order = Array.from({ length: n }, (_, i) => i);
  const ratio = (i: number) => chars[i] / tokens[i];
  order.sort((a, b) => ratio(a) - ratio(b));
  let total = 0;
  for (let i = 0; i < n; i++) total += tokens[i];
  let acc = 0;
  let median = ratio(order[n - 1]);
  for (const i of order) {
    acc += tokens[i];
    if (acc * 2 >= total) {
      median = ratio(i);
      break;
    }
  }
  let c = 0;
  let t = 0;
  for (let i = 0; i < n; i++) {
    const r = ratio(i);
    if (r * TRIM < median || r > median * TRIM) continue;
    c += chars[i];
    t += tokens[i];
  }
  return t > 0 ? c / t : median;
}

/**
 * `ratio` rounded to a step of a half power of two (…, 2, 2.83, 4, 5.66, 8, …), kept at `held`
 * unless it moved more than 3/8 of a binary order away from it: for cuts that key requests
 * (prefix_hash, the hash index), which must not move with every wobble of the estimate.
 */
export function steadyRatio(ratio: number, held: number | null): number {
  const log = Math.log2(ratio);
  if (held !== null && Math.abs(log - Math.log2(held)) <= 0.375) return held;
  return 2 ** (Math.round(log * 2) / 2);
}

/** `steadyRatio` held per model: one step per model, moved only by a real change. */
export class SteadyRatios {
  readonly #held = new Map<string, number>();

  /** The steady step for `model`'s current estimate `ratio`. */
  of(model: string | null, ratio: number): number {
    const key = model ?? "unknown";
    const held = this.#held.get(key) ?? null;
    const step = steadyRatio(ratio, held);
    if (step !== held) {
      if (held === null && this.#held.size >= 256) this.#held.clear();
      this.#held.set(key, step);
    }
    return step;
  }
}
