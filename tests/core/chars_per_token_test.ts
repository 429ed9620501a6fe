/**
 * The characters-per-token estimate: none before enough samples, the token-weighted ratio of
 * what it saw, outliers (a prompt mostly template, a routing text that is not the prompt) left
 * out, a real change followed within a window, and the steady step prefix keys are cut at.
 */

import assert from "node:assert/strict";
import {
  MIN_SAMPLES,
  RatioEstimate,
  steadyRatio,
  SteadyRatios,
  WINDOW,
} from "../../lib/core/chars_per_token.ts";

Deno.test("ratio: null until enough samples, then the ratio they show", () => {
  const r = new RatioEstimate();
  for (let i = 0; i < MIN_SAMPLES - 1; i++) r.observe(8000, 1000);
  assert.equal(r.value, null);
  r.observe(8000, 1000);
  assert.equal(r.value, 8);
});

Deno.test("ratio: short prompts and impossible ratios are not samples", () => {
  const r = new RatioEstimate();
  assert.equal(r.observe(40, 10), false, "10 tokens: mostly the chat template");
  assert.equal(r.observe(100_000, 100), false, "1,000 characters a token: not the prompt");
  assert.equal(r.observe(0, 100), false);
  assert.equal(r.samples, 0);
});

Deno.test("ratio: outliers do not move it; weighting is by tokens", () => {
  const r = new RatioEstimate();
  for (let i = 0; i < 20; i++) r.observe(2000 + 37 * i, 250); // ~8 a token, long prompts
  r.observe(30 * 20, 20); // an outlier far above (30 a token)
  r.observe(400, 200); // and one far below (2 a token)
  const v = r.value!;
  assert.ok(Math.abs(v - 9.4) < 0.6, `about 9.4 (the 20 alike samples), got ${v}`);
});

Deno.test("ratio: a real change is followed within a window", () => {
  const r = new RatioEstimate();
  for (let i = 0; i < WINDOW; i++) r.observe(4000, 1000);
  assert.equal(r.value, 4);
  for (let i = 0; i < WINDOW; i++) r.observe(16000, 1000);
  assert.equal(r.value, 16);
});

Deno.test("steady ratio: half powers of two, moved only by a real change", () => {
  assert.equal(steadyRatio(4.3, null), 4);
  assert.equal(steadyRatio(7.7, null), 8);
  assert.equal(steadyRatio(2.9, null), 2 ** 1.5);
  assert.equal(steadyRatio(5.1, 4), 4, "0.35 of an octave up: held");
  assert.equal(steadyRatio(5.3, 4), 2 ** 2.5, "0.41: the next step");
  const s = new SteadyRatios();
  assert.equal(s.of("m", 4.1), 4);
  assert.equal(s.of("m", 5.1), 4);
  assert.equal(s.of("other", 5.1), 2 ** 2.5);
  assert.equal(s.of("m", 9), 8);
});
