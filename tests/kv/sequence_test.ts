/** The stream's pure decisions: how a sequence number follows the last, and reconnection delays. */

import assert from "node:assert/strict";
import { classifySeq, reconnectDelay } from "../../lib/kv/sequence.ts";

Deno.test("sequence: first, next, gap and restart", () => {
  const cases: [number | null, number, string][] = [
    [null, 0, "first"],
    [null, 41, "first"], // joined a running publisher
    [4, 5, "next"],
    [4, 6, "gap"],
    [4, 1000, "gap"],
    [4, 4, "restart"], // a PUB connection never repeats a number
    [4, 0, "restart"],
  ];
  for (const [last, seq, step] of cases) {
    assert.equal(classifySeq(last, seq), step, `${last} -> ${seq}`);
  }
});

Deno.test("sequence: reconnection delays double up to the cap", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((a) => reconnectDelay(a, 100, 1000)), [
    100,
    200,
    400,
    800,
    1000,
    1000,
  ]);
  assert.equal(reconnectDelay(10_000, 100, 1000), 1000, "no overflow after many tries");
});
