/**
 * A multi-turn conversation trace in the Mooncake format (`trace.ts`), generated from a seed:
 * what the shipped trace (documents asked again, reuse minutes apart) lacks. Sessions arrive as
 * a Poisson process; each has 1 to `maxTurns` turns (geometric, mean `meanTurns`), a think time
 * between a reply and the next turn (exponential, mean `thinkMs`), and starts either with one of
 * `systemPrompts` shared system prompts (probability `sharedShare`, Zipf-popular) or with its
 * own. Every turn resends the whole history: the previous turn's prompt, its reply, and a new
 * user message, so its `hash_ids` extend the previous turn's full blocks; a block that was the
 * previous prompt's partial tail is a new id (its content grew), as in the public traces.
 *
 * `deno run bench/routing/conversation_trace.ts [--seed N] [--requests N] [--out FILE]` writes
 * one; `bench:routing --trace FILE` replays it. Known gap: lengths are drawn from ranges chosen
 * to resemble public multi-turn traces (prompts of ~10k tokens on average: system prompts of
 * 500-8,000 tokens, user messages log-uniform over 50-8,000, replies 50-1,000), not fitted to one.
 */

import { type Random, seededRandom } from "../../lib/core/clock.ts";
import { TRACE_BLOCK_TOKENS } from "./trace.ts";
import { taskArgs } from "../task_args.ts";

/** The generator's knobs; each field's default in its comment. */
export interface ConversationTraceConfig {
  /** Seed (0). */
  seed: number;
  /** Requests to generate (2,400). */
  requests: number;
  /** New sessions per second (0.8). */
  sessionsPerSec: number;
  /** Mean turns per session, geometric (5). */
  meanTurns: number;
  /** Most turns per session (24). */
  maxTurns: number;
  /** Mean think time between a reply and the next turn, ms (45,000). */
  thinkMs: number;
  /** Shared system prompts (16). */
  systemPrompts: number;
  /** Share of sessions that start with a shared system prompt (0.5). */
  sharedShare: number;
  /** System prompt length range, tokens ([500, 8000]). */
  systemTokens: [number, number];
  /** User message length range, tokens, log-uniform ([50, 8000]). */
  userTokens: [number, number];
  /** Reply length range, tokens, log-uniform ([50, 1000]). */
  replyTokens: [number, number];
}

/** The defaults. */
export const DEFAULT_CONVERSATION_TRACE: ConversationTraceConfig = {
  seed: 0,
  requests: 2400,
  sessionsPerSec: 0.8,
  meanTurns: 5,
  maxTurns: 24,
  thinkMs: 45_000,
  systemPrompts: 16,
  sharedShare: 0.5,
  systemTokens: [500, 8000],
  userTokens: [50, 8000],
  replyTokens: [50, 1000],
};

/** One line of the trace. */
export interface TraceLine {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

const logUniform = (r: Random, [lo, hi]: [number, number]) =>
  Math.round(Math.exp(Math.log(lo) + r() * (Math.log(hi) - Math.log(lo))));
const exponential = (r: Random, mean: number) => -mean * Math.log(1 - r());

/** The trace's lines, in arrival order. */
export function conversationTrace(
  over: Partial<ConversationTraceConfig> = {},
): TraceLine[] {
  const c = { ...DEFAULT_CONVERSATION_TRACE, ...over };
  const r = seededRandom(c.seed);
  let nextId = 0;
  // A shared system prompt's full blocks keep their ids across sessions.
  const systems = Array.from({ length: c.systemPrompts }, () => {
    const tokens = Math.round(c.systemTokens[0] + r() * (c.systemTokens[1] - c.systemTokens[0]));
    return {
      tokens,
      blocks: Array.from({ length: Math.floor(tokens / TRACE_BLOCK_TOKENS) }, () => nextId++),
    };
  });
  const zipf = systems.map((_, i) => 1 / (i + 1));
  const zipfSum = zipf.reduce((a, b) => a + b, 0);
  const pickSystem = () => {
    let x = r() * zipfSum;
    for (let i = 0; i < zipf.length; i++) if ((x -= zipf[i]) <= 0) return systems[i];
    return systems[systems.length - 1];
  };
  const lines: TraceLine[] = [];
  let start = 0;
  while (lines.length < c.requests * 1.5) {
    start += exponential(r, 1000 / c.sessionsPerSec);
    let turns = 1;
    while (turns < c.maxTurns && r() > 1 / c.meanTurns) turns++;
    // The history: full blocks (ids kept) and the length of the partial tail.
    let blocks: number[] = [];
    let length = 0;
    if (r() < c.sharedShare && systems.length > 0) {
      const s = pickSystem();
      blocks = [...s.blocks];
      length = s.tokens;
    } else {
      length = Math.round(c.systemTokens[0] + r() * (c.systemTokens[1] - c.systemTokens[0]));
      blocks = Array.from({ length: Math.floor(length / TRACE_BLOCK_TOKENS) }, () => nextId++);
    }
    let at = start;
    for (let t = 0; t < turns; t++) {
      length += logUniform(r, c.userTokens);
      const full = Math.floor(length / TRACE_BLOCK_TOKENS);
      while (blocks.length < full) blocks.push(nextId++);
      const tail = length % TRACE_BLOCK_TOKENS > 0 ? [nextId++] : [];
      const output = logUniform(r, c.replyTokens);
      lines.push({
        timestamp: Math.round(at),
        input_length: length,
        output_length: output,
        hash_ids: [...blocks, ...tail],
      });
      length += output;
      // The reply takes a few seconds; the user then thinks.
      at += 2000 + output * 20 + exponential(r, c.thinkMs);
    }
  }
  lines.sort((a, b) => a.timestamp - b.timestamp);
  return lines.slice(0, c.requests);
}

if (import.meta.main) {
  const args = taskArgs();
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i < 0 ? undefined : args[i + 1];
  };
  const lines = conversationTrace({
    seed: Number(flag("--seed") ?? 0),
    requests: Number(flag("--requests") ?? DEFAULT_CONVERSATION_TRACE.requests),
  });
  const text = lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
  const out = flag("--out");
  if (out) await Deno.writeTextFile(out, text);
  else await Deno.stdout.write(new TextEncoder().encode(text));
}
