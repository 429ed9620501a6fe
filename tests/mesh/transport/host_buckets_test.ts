/** The inbound rate limit per host, under fake time. */

import assert from "node:assert/strict";
import { peerHost, PerHostBuckets } from "../../../lib/mesh/transport/host_buckets.ts";

Deno.test("per-host buckets: one host's takes at the given times", () => {
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
    const buckets = new PerHostBuckets(rate, burst);
    assert.deepEqual(
      times.map((t) => buckets.take("10.0.0.1", t)),
      expected,
      `${rate}/s burst ${burst}`,
    );
  }
});

Deno.test("per-host buckets: one host's flood leaves the others their allowance, and the map is bounded", () => {
  const b = new PerHostBuckets(1, 2, 3);
  assert.equal(b.take("10.0.0.1", 0), true);
  assert.equal(b.take("10.0.0.1", 0), true);
  assert.equal(b.take("10.0.0.1", 0), false, "flooder out of tokens");
  assert.equal(b.take("10.0.0.2", 0), true, "another host unaffected");
  b.take("10.0.0.3", 0);
  b.take("10.0.0.4", 0); // evicts the oldest (10.0.0.1), which starts full again
  assert.equal(b.take("10.0.0.1", 0), true);
  assert.equal(peerHost("127.0.0.1:5678"), "127.0.0.1");
  assert.equal(peerHost("ipv4:10.1.2.3:9"), "10.1.2.3");
  assert.equal(peerHost("[::1]:5678"), "[::1]");
});

Deno.test("per-host buckets: a flood of distinct hosts keeps the map at its bound and the newest hosts' buckets", () => {
  const bound = 64;
  const b = new PerHostBuckets(1, 1, bound);
  const host = (i: number) => `10.1.${i >> 8}.${i & 255}`;
  for (let i = 0; i < 10_000; i++) {
    assert.equal(b.take(host(i), 0), true, `${host(i)} starts with its burst`);
    assert.ok(b.size <= bound, `${b.size} buckets after ${i + 1} hosts`);
  }
  // The newest hosts (all but the sixteenth evicted in a batch) still hold their spent buckets.
  for (let i = 10_000 - (bound - bound / 16); i < 10_000; i++) {
    assert.equal(b.take(host(i), 0), false, `${host(i)} kept its spent bucket`);
  }
  assert.ok(b.size >= bound - bound / 16, `${b.size} buckets left`);
  assert.equal(b.take(host(0), 0), true, "the first host was evicted and starts full again");
});
