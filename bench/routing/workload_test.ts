/**
 * The synthetic workload's texts in the workers' tokens: by default `simTokens` counts as the
 * simulated worker's tokenizer does; with `charsPerToken` the texts hold the asked number of
 * `RatioTokenizer` tokens (one word over at most), and the plan's other draws (tenants, turns,
 * output lengths, think times) are the same at every N.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { RatioTokenizer } from "../../lib/sim/ratio_tokenizer.ts";
import { tokenize } from "../../lib/sim/tokenizer.ts";
import { simTokens, words, Workload } from "./workload.ts";

Deno.test("workload: by default simTokens is the simulated worker's count", () => {
  for (let k = 0; k < 50; k++) {
    const text = words(seededRandom(k), 20 + 7 * k, `Question ${k}:`);
    assert.equal(simTokens(text), tokenize(text).length);
    assert.ok(simTokens(text) >= 20 + 7 * k && simTokens(text) <= 20 + 7 * k + 4);
  }
});

Deno.test("workload: with charsPerToken, words holds the asked tokens of RatioTokenizer", () => {
  for (const n of [2, 4, 8, 16]) {
    const tok = new RatioTokenizer(n);
    for (let k = 0; k < 40; k++) {
      const asked = 20 + 37 * k;
      const text = words(seededRandom(k), asked, "Question 1:", n);
      const got = tok.tokenize(text).length;
      assert.equal(simTokens(text, n), got);
      // At most one word (≤ 9 characters and a space) past the count.
      assert.ok(got >= asked && got <= asked + Math.ceil(10 / n) + 1, `N=${n}: ${got}/${asked}`);
    }
  }
});

Deno.test("workload: the plan is the same at every charsPerToken but the texts' lengths", () => {
  const plans = [2, 8, 16].map((n) => new Workload({ charsPerToken: n }));
  for (let k = 0; k < 200; k++) {
    const [a, ...rest] = plans.map((w) => w.session(k));
    for (const s of rest) {
      assert.equal(s.tenant, a.tenant);
      assert.equal(s.kind, a.kind);
      assert.deepEqual(
        s.turns.map((t) => [t.maxTokens, t.thinkMs]),
        a.turns.map((t) => [t.maxTokens, t.thinkMs]),
      );
    }
  }
  const w = plans[1];
  const tok = new RatioTokenizer(8);
  const system = w.tenants.map((t) => tok.tokenize(t.system).length);
  assert.ok(system.every((x) => x >= 1000 && x <= 3002), `system prompts ${system}`);
  const chars = w.tenants.reduce((a, t) => a + t.system.length, 0);
  const ratio = chars / system.reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(ratio / 8 - 1) < 0.05, `${ratio} characters per token`);
});
