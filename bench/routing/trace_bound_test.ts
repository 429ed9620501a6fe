/** The infinite-cache bound on a hand-made trace: leading blocks seen before, as a prefix. */

import assert from "node:assert/strict";
import type { TraceRequest } from "./trace.ts";
import { infiniteCacheBound } from "./trace_bound.ts";

const req = (inputLength: number, hashIds: number[]): TraceRequest => ({
  timestampMs: 0,
  inputLength,
  outputLength: 4,
  hashIds,
});

const TRACE = [
  req(1024, [1, 2]), // warm-up
  req(1200, [1, 2, 3]), // [1, 2] seen: 1,024 of 1,200
  req(1024, [2, 1]), // 2 and 1 were seen, but never as a prefix starting with 2: 0
  req(1200, [1, 2, 3]), // an exact repeat, partial last block included: all 1,200
  req(1536, [1, 4, 3]), // [1] seen, [1, 4] not; 3 after 4 is not a seen prefix: 512
  req(100, [9]), // nothing: 0
];

Deno.test("cache bound: tokens of leading blocks seen earlier, warm-up counted as history", () => {
  const b = infiniteCacheBound(TRACE, 1, TRACE.length);
  assert.equal(b.promptTokens, 1200 + 1024 + 1200 + 1536 + 100);
  assert.equal(b.hitTokens, 1024 + 0 + 1200 + 512 + 0);
  assert.equal(b.rate, b.hitTokens / b.promptTokens);
});

Deno.test("cache bound: only requests from..to-1 are counted; later ones are not history", () => {
  assert.deepEqual(infiniteCacheBound(TRACE, 1, 2), {
    promptTokens: 1200,
    hitTokens: 1024,
    rate: 1024 / 1200,
  });
  // Without the warm-up as history, the first request has nothing before it.
  assert.equal(infiniteCacheBound(TRACE, 0, 1).hitTokens, 0);
  assert.deepEqual(infiniteCacheBound(TRACE, 3, 3), { promptTokens: 0, hitTokens: 0, rate: null });
});
