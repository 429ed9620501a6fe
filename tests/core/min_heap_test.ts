/**
 * The binary min-heap under the trees' eviction and the clocks' timers: pops in `less` order
 * whatever the pushes, peeks without removing, and lists what it holds.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { MinHeap } from "../../lib/core/min_heap.ts";

Deno.test("min heap: pops in order, peeks in place", () => {
  const h = new MinHeap<number>((a, b) => a < b);
  assert.equal(h.peek(), undefined);
  assert.equal(h.pop(), undefined);
  const random = seededRandom(3);
  const xs = Array.from({ length: 500 }, () => Math.floor(random() * 100));
  for (const x of xs) h.push(x);
  assert.equal(h.size, 500);
  assert.equal(h.values().length, 500);
  assert.equal(h.peek(), Math.min(...xs));
  assert.equal(h.size, 500, "peek removes nothing");
  const out: number[] = [];
  for (let x = h.pop(); x !== undefined; x = h.pop()) out.push(x);
  assert.deepEqual(out, [...xs].sort((a, b) => a - b));
});
