/**
 * Decision cost and memory of cache_aware's radix trees (`deno task bench`; for memory figures
 * run `deno bench --v8-flags=--expose-gc bench/cache_aware_bench.ts`). Results go to
 * BENCHMARKS.md; the goal is under 20 µs per decision at 10^5 entries.
 *
 * Workload (seeded): 64 tenants (workers), 16 system prompts of 2 KB shared across them, and
 * conversations of up to 16 turns growing on them: a prompt is system prompt + a 1 KB opening +
 * 64 chars per turn (3–4 KB). An entry is one inserted prompt. Trees of 10^3, 10^5 and 10^6
 * entries are built once, at load, outside the measured code. Each decision is one
 * `matchAndInsert` of the next turn of a random conversation (a finished one restarts as a new
 * conversation), with a chooser shaped like the policy's (over 0.3 matched: a recent holder,
 * else rotate). The tree is evicted back to its built size when it has grown by 10%, outside the
 * measurement, so it stays near its nominal entry count. The token tree runs the same shapes in
 * tokens (512-token system prompts, 256-token openings, 16-token turns, page 16: ≤ 1 K tokens).
 *
 * Each bench iteration times a batch of 100 decisions: divide the time per iteration by 100.
 *
 * Memory per cached unit: growth of V8 heap + external memory over the build (after gc, when
 * exposed) divided by the tree's size (Σ edge length × tenants, the unit `--max-tree-size`
 * counts).
 */

import { seededRandom } from "../lib/core/clock.ts";
import { StringTree } from "../lib/policies/cache_aware/string_tree.ts";
import { TokenTree } from "../lib/policies/cache_aware/token_tree.ts";
import type { PrefixMatch } from "../lib/policies/cache_aware/tree_types.ts";

const TENANTS = Array.from({ length: 64 }, (_, i) => `http://10.0.0.${i}:8000`);
const TURNS = 16;
const SIZES = [1e3, 1e5, 1e6];
const gc = (globalThis as { gc?: (o?: { type: "minor" | "major" }) => void }).gc;

/** What a tree offers the harness, in either units. */
interface Shape<K> {
  unit: string;
  system: number;
  opening: number;
  turn: number;
  /** `len` units of content starting at `offset` of a seeded corpus. */
  piece(offset: number, len: number): K;
  concat(parts: K[]): K;
  tree(): {
    matchAndInsert(k: K, f: (m: PrefixMatch) => string | null): unknown;
    size: number;
    evict(b: number): number;
    nodeCount: number;
  };
}

const random = seededRandom(2024);
const WORDS = Array.from({ length: 4096 }, () => {
  const n = 2 + Math.floor(random() * 8);
  let w = "";
  for (let i = 0; i < n; i++) w += String.fromCharCode(97 + Math.floor(random() * 26));
  return w;
});
const CORPUS_LEN = 1 << 24;
const corpusParts: string[] = [];
for (let len = 0; len < CORPUS_LEN + 4096;) {
  const w = WORDS[Math.floor(random() * WORDS.length)] + " ";
  corpusParts.push(w);
  len += w.length;
}
const CORPUS = corpusParts.join("");
corpusParts.length = 0;
const TOKEN_CORPUS = Uint32Array.from({ length: CORPUS_LEN / 4 + 4096 }, () => random() * 50000);

const stringShape: Shape<string> = {
  unit: "char",
  system: 2048,
  opening: 1024,
  turn: 64,
  piece: (offset, len) => CORPUS.slice(offset % CORPUS_LEN, offset % CORPUS_LEN + len),
  // Flattened here so the measured call does not pay for building the prompt.
  concat: (parts) => (" " + parts.join("")).slice(1),
  tree: () => new StringTree(),
};

const tokenShape: Shape<number[]> = {
  unit: "token",
  system: 512,
  opening: 256,
  turn: 16,
  piece: (offset, len) => {
    const at = offset % (CORPUS_LEN / 4);
    const ids: number[] = [];
    for (let i = at; i < at + len; i++) ids.push(TOKEN_CORPUS[i]);
    return ids;
  },
  concat: (parts) => {
    const ids: number[] = [];
    for (const part of parts) for (let i = 0; i < part.length; i++) ids.push(part[i]);
    return ids;
  },
  tree: () => new TokenTree({ pageSize: 16 }),
};

/** A conversation: its system prompt, where its content starts in the corpus, turns so far. */
interface Conversation {
  system: number;
  start: number;
  turns: number;
}

/** A built tree and the conversations that can continue on it. */
function build<K>(shape: Shape<K>, entries: number) {
  const systems = Array.from({ length: 16 }, (_, i) => shape.piece(i * 7919, shape.system));
  const contentLen = shape.opening + TURNS * shape.turn;
  let nextStart = 0;
  const fresh = (): Conversation => {
    nextStart += contentLen + 1 + Math.floor(random() * 64);
    return { system: Math.floor(random() * 16), start: 1_000_000 + nextStart, turns: 0 };
  };
  const prompt = (c: Conversation): K =>
    shape.concat([systems[c.system], shape.piece(c.start, shape.opening + c.turns * shape.turn)]);
  let rotate = 0;
  const choose = (m: PrefixMatch) =>
    m.matched / m.total > 0.3 && m.tenants.length > 0
      ? m.tenants[rotate++ % m.tenants.length]
      : TENANTS[rotate++ % TENANTS.length];

  const heap = () => {
    gc?.();
    gc?.(); // the first pass may leave some of the previous build's garbage
    const { heapUsed, external } = Deno.memoryUsage();
    return heapUsed + external;
  };
  const heapBefore = heap();
  const started = performance.now();
  const tree = shape.tree();
  const conversations = Array.from({ length: Math.ceil(entries / TURNS) }, fresh);
  for (let turn = 0, done = 0; turn < TURNS && done < entries; turn++) {
    for (const c of conversations) {
      if (done++ >= entries) break;
      c.turns = turn;
      tree.matchAndInsert(prompt(c), choose);
    }
  }
  const buildMs = performance.now() - started;
  const bytes = heap() - heapBefore;
  console.log(
    `${shape.unit} tree, ${entries} entries: built in ${(buildMs / 1000).toFixed(1)} s; ` +
      `${tree.nodeCount} nodes, size ${tree.size} ${shape.unit}s; ` +
      `${(bytes / tree.size).toFixed(2)} bytes per ${shape.unit}${gc ? "" : " (no gc exposed)"}`,
  );

  const budget = tree.size;
  const evictEvery = Math.max(100, entries / 10);
  let calls = 0;
  /** The next turn of a random conversation (a finished one starts over as a new one). */
  const next = (): K => {
    const i = Math.floor(random() * conversations.length);
    let c = conversations[i];
    if (c.turns + 1 >= TURNS) c = conversations[i] = fresh();
    else c.turns++;
    if (++calls % evictEvery === 0) tree.evict(budget);
    return prompt(c);
  };
  return { tree, next, choose };
}

// Deno ignores b.start()/b.end() around sections shorter than a few µs, so each iteration
// times a batch of decisions whose prompts were built beforehand.
const BATCH = 100;

for (const shape of [stringShape, tokenShape] as Shape<unknown>[]) {
  for (const entries of SIZES) {
    const { tree, next, choose } = build(shape, entries);
    const batch: unknown[] = [];
    Deno.bench({
      name: `${shape.unit} tree, ${entries.toExponential(0)} entries: ${BATCH} decisions`,
      group: `${shape.unit} tree`,
      n: 200,
      warmup: 20,
      fn: (b) => {
        for (let i = 0; i < BATCH; i++) batch[i] = next();
        // Tenure the batch, so young-generation collections during the timed loop copy only
        // what the tree allocates, not the prompts the harness built.
        gc?.({ type: "minor" });
        gc?.({ type: "minor" });
        b.start();
        for (let i = 0; i < BATCH; i++) tree.matchAndInsert(batch[i], choose);
        b.end();
      },
    });
  }
}
