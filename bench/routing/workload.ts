/**
 * The routing benchmark's seeded workload: tenants with long shared system prompts, sessions
 * (multi-turn conversations and a share of one-off prompts) and Poisson arrival gaps. Everything
 * here is a pure function of the seed: session `k` has the same tenant, user messages, output
 * lengths and think times in every run and against every target. Only the assistant replies
 * (taken from the responses) and the interleaving of sessions depend on the run.
 *
 * Token counts are aimed at the simulated worker's tokenizer (`simTokens`): by default it cuts
 * words into chunks of at most 4 characters and counts each whitespace run as a token; with
 * `charsPerToken` (the workers' `--chars-per-token`) it is `RatioTokenizer`, whose pieces average
 * that many characters, and the texts are as long as its count says. A message's content sits
 * between the chat template's `role\n` and `<|im_end|>`, where both tokenizers cut it as they cut
 * it alone; the template's role markers add a few tokens per message on top.
 */

import { type Random, seededRandom } from "../../lib/core/clock.ts";
import { RatioTokenizer } from "../../lib/sim/ratio_tokenizer.ts";

/** The workload's shape; every field has its default in the comment. */
export interface WorkloadConfig {
  /** Seed of everything generated (0). */
  seed: number;
  /** Number of tenants, each with its own system prompt (24). */
  tenants: number;
  /** Zipf exponent of tenant popularity: tenant k has weight 1/(k+1)^skew; 0 is uniform (1). */
  tenantSkew: number;
  /** System prompt length in tokens, drawn uniformly per tenant ([1000, 3000]). */
  systemTokens: [number, number];
  /** Share of sessions that are a single one-off prompt (0.2). */
  oneOffShare: number;
  /** Turns per conversation, uniform ([2, 6]). */
  turns: [number, number];
  /** User message length in tokens, uniform per turn ([20, 120]). */
  userTokens: [number, number];
  /** `max_tokens` per turn, uniform ([16, 64]). */
  outputTokens: [number, number];
  /** Mean think time between a reply and the next turn, ms, exponential (open loop only) (500). */
  thinkMs: number;
  /**
   * The workers' `--chars-per-token`, which token counts are aimed at; null for their default
   * tokenizer (null).
   */
  charsPerToken: number | null;
}

/** The defaults of `WorkloadConfig`. */
export const DEFAULT_WORKLOAD: WorkloadConfig = {
  seed: 0,
  tenants: 24,
  tenantSkew: 1,
  systemTokens: [1000, 3000],
  oneOffShare: 0.2,
  turns: [2, 6],
  userTokens: [20, 120],
  outputTokens: [16, 64],
  thinkMs: 500,
  charsPerToken: null,
};

/** One tenant: its shared system prompt. */
export interface Tenant {
  /** 0-based index. */
  index: number;
  /** The system prompt every session of this tenant starts with. */
  system: string;
}

/** One planned turn: what the user sends and how much the model answers. */
export interface Turn {
  /** The user message. */
  user: string;
  /** `max_tokens` of the request. */
  maxTokens: number;
  /** Think time before this turn, ms (0 for the first). */
  thinkMs: number;
}

/** One planned session: a conversation or a one-off prompt. */
export interface Session {
  /** Plan position (0-based). */
  index: number;
  /** Conversation id, sent as `X-SMG-Routing-Key` and `X-Session-Id`. */
  id: string;
  /** Tenant index. */
  tenant: number;
  /** `conversation` (several turns) or `one-off` (one turn). */
  kind: "conversation" | "one-off";
  /** The turns, in order. */
  turns: Turn[];
}

/** A chat message as sent to `/v1/chat/completions`. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

const SYLLABLES = [
  "ka",
  "lo",
  "mi",
  "ren",
  "tas",
  "vo",
  "qui",
  "zen",
  "dar",
  "pel",
  "sor",
  "nu",
  "fi",
  "gha",
  "bel",
  "tor",
  "ix",
  "mon",
  "ea",
  "stu",
];

const RATIO = new Map<number, RatioTokenizer>();

/** The workers' tokenizer at `--chars-per-token n` (one instance per n). */
export function ratioTokenizer(n: number): RatioTokenizer {
  let tok = RATIO.get(n);
  if (!tok) RATIO.set(n, tok = new RatioTokenizer(n));
  return tok;
}

/**
 * Tokens of `text` under the simulated tokenizer: ≤4-char word chunks and whitespace runs, or
 * `RatioTokenizer`'s pieces when `charsPerToken` is given.
 */
export function simTokens(text: string, charsPerToken: number | null = null): number {
  if (charsPerToken !== null) return ratioTokenizer(charsPerToken).tokenize(text).length;
  let n = 0;
  for (const m of text.matchAll(/\s+|\S+/g)) n += /^\s/.test(m[0]) ? 1 : Math.ceil(m[0].length / 4);
  return n;
}

/** Characters per simulated token over `texts` (of `RatioTokenizer` with `charsPerToken`). */
export function charsPerSimToken(texts: readonly string[], charsPerToken: number | null): number {
  let chars = 0;
  let tokens = 0;
  for (const t of texts) {
    chars += t.length;
    tokens += simTokens(t, charsPerToken);
  }
  return chars / Math.max(1, tokens);
}

function uniformInt(random: Random, [lo, hi]: [number, number]): number {
  return lo + Math.floor(random() * (hi - lo + 1));
}

/** A word of 1-3 syllables from `random`. */
function word(random: Random): string {
  let w = "";
  const syllables = 1 + Math.floor(random() * 3);
  for (let i = 0; i < syllables; i++) w += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
  return w;
}

/**
 * Words from `random` until the text reaches `tokens` simulated tokens. With `charsPerToken`,
 * `RatioTokenizer`'s tokens, and the words come from a stream forked off `random` with one draw:
 * whatever the length, the caller's later draws (output lengths, think times) are then the same
 * at every `charsPerToken`.
 */
export function words(
  random: Random,
  tokens: number,
  prefix = "",
  charsPerToken: number | null = null,
): string {
  const out = prefix ? [prefix] : [];
  if (charsPerToken !== null) {
    const own = seededRandom(Math.floor(random() * 2 ** 32));
    const counter = ratioTokenizer(charsPerToken).counter();
    counter.add(prefix);
    while (counter.tokens < tokens) {
      const w = word(own);
      counter.add(out.length ? " " + w : w);
      out.push(w);
    }
    return out.join(" ");
  }
  let n = simTokens(prefix);
  while (n < tokens) {
    const w = word(random);
    out.push(w);
    n += Math.ceil(w.length / 4) + (out.length > 1 ? 1 : 0);
  }
  return out.join(" ");
}

/** Mixes `seed` and up to two integers into a 32-bit seed (splitmix-style). */
export function mix(seed: number, a: number, b = 0): number {
  let h = (seed ^ Math.imul(a + 1, 0x9e3779b1) ^ Math.imul(b + 1, 0x85ebca77)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** The plan: tenants and sessions derived from one seed. */
export class Workload {
  /** The settings the plan was made from. */
  readonly config: WorkloadConfig;
  /** Every tenant, by index. */
  readonly tenants: readonly Tenant[];
  readonly #cumulative: number[];

  /** Builds the tenants' system prompts at once; sessions are made on demand. */
  constructor(config: Partial<WorkloadConfig> = {}) {
    this.config = { ...DEFAULT_WORKLOAD, ...config };
    const c = this.config;
    this.tenants = Array.from({ length: c.tenants }, (_, i) => {
      const random = seededRandom(mix(c.seed, 0x7e4a47, i));
      const prefix = `You are the assistant of tenant ${i}. Follow these instructions:`;
      const system = words(random, uniformInt(random, c.systemTokens), prefix, c.charsPerToken);
      return { index: i, system };
    });
    let total = 0;
    this.#cumulative = this.tenants.map((_, i) => total += 1 / (i + 1) ** c.tenantSkew);
  }

  /** Session `k` of the plan: the same for a given seed, whatever happened before. */
  session(k: number): Session {
    const c = this.config;
    const random = seededRandom(mix(c.seed, 0x5e55, k));
    const pick = random() * this.#cumulative[this.#cumulative.length - 1];
    const tenant = Math.max(0, this.#cumulative.findIndex((x) => pick < x));
    const oneOff = random() < c.oneOffShare;
    const n = oneOff ? 1 : uniformInt(random, c.turns);
    const turns = Array.from({ length: n }, (_, t) => ({
      user: words(random, uniformInt(random, c.userTokens), `Question ${t + 1}:`, c.charsPerToken),
      maxTokens: uniformInt(random, c.outputTokens),
      thinkMs: t === 0 ? 0 : -Math.log(1 - random()) * c.thinkMs,
    }));
    return {
      index: k,
      id: `s${c.seed}-${k}`,
      tenant,
      kind: oneOff ? "one-off" : "conversation",
      turns,
    };
  }

  /** Mean requests per session (one-offs count one). */
  meanTurns(): number {
    const c = this.config;
    return c.oneOffShare + (1 - c.oneOffShare) * (c.turns[0] + c.turns[1]) / 2;
  }

  /** The messages of turn `t` of `s`, given the assistant replies to turns 0..t-1. */
  messages(s: Session, t: number, replies: readonly string[]): ChatMessage[] {
    const m: ChatMessage[] = [{ role: "system", content: this.tenants[s.tenant].system }];
    for (let i = 0; i <= t; i++) {
      m.push({ role: "user", content: s.turns[i].user });
      if (i < t) m.push({ role: "assistant", content: replies[i] });
    }
    return m;
  }

  /**
   * The headers every request of `s` carries: its conversation id as `X-SMG-Routing-Key` and
   * `X-Session-Id`, and its tenant index as `X-Tenant-Id` (read by `ref:oracle` only).
   */
  headers(s: Session): Record<string, string> {
    return { "x-smg-routing-key": s.id, "x-session-id": s.id, "x-tenant-id": String(s.tenant) };
  }

  /** Tenant `k`'s share of sessions (Zipf weight over the sum of all). */
  popularity(k: number): number {
    const prev = k === 0 ? 0 : this.#cumulative[k - 1];
    return (this.#cumulative[k] - prev) / this.#cumulative[this.#cumulative.length - 1];
  }

  /** Exponential gaps (ms) of a Poisson process at `perSecond`, seeded by `stream`. */
  *poissonGaps(perSecond: number, stream = 0): Generator<number> {
    const random = seededRandom(mix(this.config.seed, 0xa441, stream));
    for (;;) yield -Math.log(1 - random()) * 1000 / perSecond;
  }
}
