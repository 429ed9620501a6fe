/** The inbound rate limit's arithmetic, under fake time. */

import assert from "node:assert/strict";
import { TokenBucket } from "../../../lib/mesh/transport/token_bucket.ts";

Deno.test("token bucket: takes at the given times", () => {
  // [rate/s, burst, times of successive takes in ms, expected results]
  const table: [number, number, number[], boolean[]][] = [
    [1, 3, [0, 0, 0, 0], [true, true, true, false]],
    [1, 3, [0, 0, 0, 999, 1000], [true, true, true, false, true]],
    [10, 1, [0, 50, 100, 150, 200], [true, false, true, false, true]],
    // Refill never exceeds the burst, however long the pause.
    [1000, 2, [0, 60_000, 60_000, 60_000], [true, true, true, false]],
    // A clock that steps backwards adds nothing.
    [1, 1, [5000, 0, 999], [true, false, false]],
    [Infinity, 0, [0, 0, 0], [true, true, true]],
  ];
  for (const [rate, burst, times, expected] of table) {
    const bucket = new TokenBucket(rate, burst);
    assert.deepEqual(times.map((t) => bucket.take(t)), expected, `${rate}/s burst ${burst}`);
  }
});
