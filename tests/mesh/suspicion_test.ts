import assert from "node:assert/strict";
import { retransmitLimit, suspicionBounds, suspicionTimeout } from "../../lib/mesh/suspicion.ts";

Deno.test("suspicion: bounds follow memberlist's formula (mult 4, max mult 6, 1 s probes)", () => {
  // [members, min s, max s, k]: min = 4 × max(1, log10 N) s, k = 4 − 2 confirmations and
  // max = 6 × min, or k = 0 and max = min when fewer than k others could confirm.
  const rows: [number, number, number, number][] = [
    [1, 4, 4, 0],
    [3, 4, 4, 0], // N − 2 < k: the timeout is simply the minimum
    [5, 4, 24, 2],
    [10, 4, 24, 2],
    [100, 8, 48, 2],
    [1000, 12, 72, 2],
  ];
  for (const [n, min, max, k] of rows) {
    const b = suspicionBounds(n, 1000, 4, 6);
    assert.equal(Math.round(b.minMs), min * 1000, `N=${n} min`);
    assert.equal(Math.round(b.maxMs), max * 1000, `N=${n} max`);
    assert.equal(b.k, k, `N=${n} k`);
  }
});

Deno.test("suspicion: the timeout shrinks on a log scale with confirmations, never below the minimum", () => {
  const b = suspicionBounds(5, 1000, 4, 6); // min 4 s, max 24 s, k 2
  assert.equal(suspicionTimeout(b, 0), 24_000);
  // max − log(2)/log(3) × (max − min) = 24 − 0.631 × 20
  assert.equal(suspicionTimeout(b, 1), Math.floor(24_000 - (Math.log(2) / Math.log(3)) * 20_000));
  assert.equal(suspicionTimeout(b, 2), 4000);
  assert.equal(suspicionTimeout(b, 10), 4000);
  assert.equal(suspicionTimeout(suspicionBounds(3, 1000, 4, 6), 0), 4000, "k = 0");
});

Deno.test("suspicion: piggyback retransmissions grow with log10 of the cluster", () => {
  assert.deepEqual([1, 5, 9, 10, 99, 500].map((n) => retransmitLimit(n, 4)), [4, 4, 4, 8, 8, 12]);
});
