/**
 * A trace's prompts: block texts are seeded and exactly 512 simulated tokens, prompts share their
 * leading blocks' text exactly, the last block is cut at `input_length`, and the cache is bounded.
 * With `--chars-per-token N`, the same in the workers' `RatioTokenizer` tokens, give or take one
 * a block in a prompt.
 */

import assert from "node:assert/strict";
import type { TraceRequest } from "./trace.ts";
import { blockText, BlockTexts, cutTokens, tracePrompt, warmBlockTexts } from "./trace_prompts.ts";
import { simTokens } from "./workload.ts";
import { renderChat } from "../../lib/sim/chat_template.ts";
import { RatioTokenizer } from "../../lib/sim/ratio_tokenizer.ts";
import { tokenize } from "../../lib/sim/tokenizer.ts";

const req = (inputLength: number, hashIds: number[]): TraceRequest => ({
  timestampMs: 0,
  inputLength,
  outputLength: 4,
  hashIds,
});

Deno.test("trace prompts: a block's text depends on its id and the seed only, 512 tokens", () => {
  assert.equal(blockText(0, 7), blockText(0, 7));
  assert.notEqual(blockText(0, 7), blockText(0, 8));
  assert.notEqual(blockText(0, 7), blockText(1, 7));
  for (let id = 0; id < 300; id++) {
    const t = blockText(3, id);
    assert.equal(simTokens(t), 512, `block ${id}`);
    assert.ok(
      t.startsWith(" ") && !/\s$/.test(t),
      `block ${id} starts with a space, ends in a word`,
    );
  }
});

Deno.test("trace prompts: deterministic, shared leading blocks give identical leading text", () => {
  const a = req(1300, [1, 2, 3]);
  const b = req(1100, [1, 2, 9]);
  const c = req(1024, [5, 2]);
  const pa = tracePrompt(new BlockTexts(0), a);
  assert.equal(tracePrompt(new BlockTexts(0), a), pa);
  const pb = tracePrompt(new BlockTexts(0), b);
  const shared = blockText(0, 1) + blockText(0, 2);
  assert.ok(pa.startsWith(shared) && pb.startsWith(shared));
  assert.notEqual(
    pa.slice(shared.length, shared.length + 40),
    pb.slice(shared.length, shared.length + 40),
  );
  // Block 2 after a different first block: same block text, different prompt from the start.
  const pc = tracePrompt(new BlockTexts(0), c);
  assert.equal(pc, blockText(0, 5) + blockText(0, 2));
  assert.notEqual(pc.slice(0, 20), pa.slice(0, 20));
});

Deno.test("trace prompts: the last block is cut at input_length, tokens line up across blocks", () => {
  const texts = new BlockTexts(0);
  for (
    const [input, ids] of [[1, [4]], [13, [4]], [512, [4]], [513, [4, 5]], [1500, [
      4,
      5,
      6,
    ]]] as const
  ) {
    const p = tracePrompt(texts, req(input, [...ids]));
    assert.equal(simTokens(p), input, `input_length ${input}`);
    // The simulated worker's own tokenizer agrees, and a shared block is the same ids in both.
    assert.equal(tokenize(p).length, input);
  }
  const one = tokenize(tracePrompt(texts, req(1024, [4, 5])));
  const two = tokenize(tracePrompt(texts, req(1200, [4, 5, 6])));
  assert.deepEqual(two.slice(0, 1024), one);
  const cut = tracePrompt(texts, req(700, [4, 5]));
  assert.equal(cut, blockText(0, 4) + cutTokens(blockText(0, 5), 188));
});

Deno.test("trace prompts: cutTokens keeps whole pieces and stops at the text's end", () => {
  assert.equal(cutTokens(" abcdefgh ij", 1), " ");
  assert.equal(cutTokens(" abcdefgh ij", 2), " abcd");
  assert.equal(cutTokens(" abcdefgh ij", 3), " abcdefgh");
  assert.equal(cutTokens(" abcdefgh ij", 99), " abcdefgh ij");
  assert.equal(cutTokens("abc", 0), "");
});

Deno.test("trace prompts: the block cache keeps the most recently used, up to its bound", () => {
  const texts = new BlockTexts(0, 2);
  texts.text(1);
  texts.text(2);
  texts.text(1); // 1 is now the most recent
  texts.text(3); // evicts 2
  assert.equal(texts.size, 2);
  assert.equal(texts.text(2), blockText(0, 2), "an evicted block comes back the same");
  assert.throws(() => new BlockTexts(0, 0), /maxBlocks must be ≥ 1/);
});

Deno.test("trace prompts: a warmed cache holds every block of the requests and builds the same prompts", () => {
  const requests = [req(1500, [1, 2, 3]), req(1100, [1, 2, 9])];
  const warm = warmBlockTexts(5, requests);
  assert.equal(warm.size, 4);
  const cold = new BlockTexts(5, 1);
  for (const r of requests) assert.equal(tracePrompt(warm, r), tracePrompt(cold, r));
  assert.equal(warm.size, 4, "nothing built twice, nothing evicted");
});

Deno.test("trace prompts at --chars-per-token N: blocks of 512 engine tokens, prompts of input_length", () => {
  for (const n of [2, 8, 16]) {
    const tok = new RatioTokenizer(n);
    for (let id = 0; id < 20; id++) {
      const t = blockText(3, id, n);
      assert.equal(tok.tokenize(t).length, 512, `N=${n}, block ${id}`);
      assert.equal(simTokens(t, n), 512);
      assert.ok(Math.abs(t.length / 512 / n - 1) < 0.1, `N=${n}: ${t.length} characters`);
    }
    assert.equal(blockText(3, 7, n), blockText(3, 7, n));
    const texts = new BlockTexts(0, 64, n);
    const template = tok.tokenize(renderChat([{ role: "user", content: "" }])).length;
    for (const [input, ids] of [[13, [4]], [512, [4]], [700, [4, 5]], [5000, range(10)]] as const) {
      const p = tracePrompt(texts, req(input, [...ids]));
      // As the worker counts it: inside the chat template, blocks joined.
      const got = tok.tokenize(renderChat([{ role: "user", content: p }])).length - template;
      assert.ok(Math.abs(got - input) <= ids.length - 1, `N=${n}: ${got} tokens for ${input}`);
    }
    // Shared leading blocks: the same text, so the same tokens but for the piece open at the end.
    const a = tok.tokenize(tracePrompt(texts, req(1024, [4, 5])));
    const b = tok.tokenize(tracePrompt(texts, req(1500, [4, 5, 6])));
    const same = a.findIndex((id, i) => b[i] !== id);
    assert.ok(same === -1 || same >= a.length - 2, `N=${n}: tokens part at ${same} of ${a.length}`);
  }
});

/** 0..n-1. */
function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
