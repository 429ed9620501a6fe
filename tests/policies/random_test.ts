import assert from "node:assert/strict";
import { RandomPolicy } from "../../lib/policies/random.ts";
import { deps, request, tally, views } from "../../support/policies.ts";

Deno.test("random: roughly uniform over a seeded run", () => {
  // 4 workers x 10,000 picks: expected 2,500 each; binomial sd ~ 43, so ±5% (125) is ~3 sd.
  for (const seed of [1, 2, 3]) {
    const p = new RandomPolicy(deps(seed));
    const cands = views(4);
    const t = tally(Array.from({ length: 10_000 }, () => p.select(cands, request())));
    assert.equal(t.size, 4, `seed ${seed}`);
    for (const [id, n] of t) {
      assert.ok(Math.abs(n - 2500) <= 125, `seed ${seed}: ${id} got ${n} of 10000`);
    }
  }
});

Deno.test("random: every candidate can be picked, the last included", () => {
  const p = new RandomPolicy(deps(4));
  const cands = views(10);
  const t = tally(Array.from({ length: 2000 }, () => p.select(cands, request())));
  assert.deepEqual([...t.keys()].sort(), cands.map((c) => c.id).sort());
});

Deno.test("random: picks follow the injected random source", () => {
  const cands = views(4);
  const table: [number, string][] = [[0, "w0"], [0.249, "w0"], [0.25, "w1"], [0.74, "w2"], [
    0.9999,
    "w3",
  ]];
  for (const [r, want] of table) {
    const p = new RandomPolicy(deps(0, () => r));
    assert.equal(p.select(cands, request())?.id, want, String(r));
  }
});

Deno.test("random: different seeds give different sequences", () => {
  const run = (seed: number) => {
    const p = new RandomPolicy(deps(seed));
    const cands = views(5);
    return Array.from({ length: 50 }, () => p.select(cands, request())?.id).join();
  };
  assert.notEqual(run(1), run(2));
});
