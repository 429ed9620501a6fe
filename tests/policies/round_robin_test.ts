import assert from "node:assert/strict";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { request, tally, view, views } from "../../support/policies.ts";

Deno.test("round_robin: rotates through the candidates in order", () => {
  const p = new RoundRobinPolicy();
  const cands = views(3);
  const picks = Array.from({ length: 7 }, () => p.select(cands, request())?.id);
  assert.deepEqual(picks, ["w0", "w1", "w2", "w0", "w1", "w2", "w0"]);
});

Deno.test("round_robin: even shares per candidate set", () => {
  const table: { workers: number; requests: number; each: number }[] = [
    { workers: 2, requests: 10, each: 5 },
    { workers: 3, requests: 30, each: 10 },
    { workers: 4, requests: 40, each: 10 },
    { workers: 7, requests: 70, each: 10 },
  ];
  for (const { workers, requests, each } of table) {
    const p = new RoundRobinPolicy();
    const cands = views(workers);
    const t = tally(Array.from({ length: requests }, () => p.select(cands, request())));
    assert.deepEqual([...t.values()], Array(workers).fill(each), `${workers} workers`);
  }
});

Deno.test("round_robin: interleaving two candidate sets skews neither", () => {
  // Model a: 4 workers; model b: 2 workers, one of them shared with a.
  const a = views(4, "a");
  const b = [a[0], view("b1")];
  const p = new RoundRobinPolicy();
  const picksA = [];
  const picksB = [];
  for (let i = 0; i < 40; i++) {
    picksA.push(p.select(a, request("x", { model: "a" })));
    picksB.push(p.select(b, request("y", { model: "b" })));
    // An uneven pattern: b gets an extra request every third round.
    if (i % 3 === 0) picksB.push(p.select(b, request("y", { model: "b" })));
  }
  assert.deepEqual([...tally(picksA).values()], [10, 10, 10, 10]);
  const tb = tally(picksB);
  assert.equal(picksB.length, 54);
  assert.equal(tb.get("a0"), 27);
  assert.equal(tb.get("b1"), 27);
});

Deno.test("round_robin: a changed set starts its own rotation, the old one resumes later", () => {
  const p = new RoundRobinPolicy();
  const full = views(3);
  assert.equal(p.select(full, request())?.id, "w0");
  assert.equal(p.select(full, request())?.id, "w1");
  // w1 is unavailable for a moment: a new set.
  const partial = [full[0], full[2]];
  assert.equal(p.select(partial, request())?.id, "w0");
  assert.equal(p.select(partial, request())?.id, "w2");
  // Back to the full set: it carries on where it was.
  assert.equal(p.select(full, request())?.id, "w2");
  assert.equal(p.select(full, request())?.id, "w0");
});

Deno.test("round_robin: does not read the request", () => {
  const p = new RoundRobinPolicy();
  const cands = views(2);
  const picks = ["a", "b", "a", "b"].map((t) => p.select(cands, request(t))?.id);
  assert.deepEqual(picks, ["w0", "w1", "w0", "w1"]);
  assert.deepEqual(p.needs, { requestText: false, backendLoads: false });
});

Deno.test("round_robin: a set seen again after thousands of others still rotates", () => {
  const p = new RoundRobinPolicy();
  const hot = views(2, "hot");
  p.select(hot, request());
  for (let i = 0; i < 3000; i++) p.select([view(`a${i}`), view(`b${i}`)], request());
  // The hot set may have been evicted and restarted, but keeps alternating.
  const next = [p.select(hot, request())?.id, p.select(hot, request())?.id];
  assert.deepEqual(next.toSorted(), ["hot0", "hot1"]);
});
