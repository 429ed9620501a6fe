/**
 * The typed-array hash table under the KV-event index, against a `Map` doing the same random
 * inserts, updates and deletes (backward-shift deletion across the wrap, growth, wider words).
 */

import assert from "node:assert/strict";
import { foldString, NumTable } from "../../lib/kv/num_table.ts";
import { BlockIndex } from "../../lib/kv/block_index.ts";
import { FakeClock } from "../../lib/core/clock.ts";

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 0x100000000;
  };
}

Deno.test("num table: random inserts, updates and deletes agree with a Map", () => {
  const r = rng(11);
  const t = new NumTable(2, 1);
  const ref = new Map<number, [number, number, number]>();
  // Few distinct keys over many operations: long probe runs, deletes in their middle, regrowth.
  const pool = Array.from(
    { length: 300 },
    (_, i) => i < 100 ? i + 1 : Math.floor(r() * 2 ** 53) + 1,
  );
  for (let op = 0; op < 20_000; op++) {
    const key = pool[Math.floor(r() * pool.length)];
    if (r() < 0.6) {
      const s = t.insert(key);
      assert.equal(t.created, !ref.has(key));
      const v: [number, number, number] = [r(), r(), Math.floor(r() * 2 ** 32)];
      t.setF64(s, v[0]);
      t.setF64(s, v[1], 1);
      t.u32[t.wordsAt(s)] = v[2];
      ref.set(key, v);
    } else assert.equal(t.delete(key), ref.delete(key));
    if (op % 1000 === 0) t.widen(1 + Math.floor(op / 5000)); // more words keep what the first held
  }
  assert.equal(t.size, ref.size);
  for (const key of pool) {
    const s = t.find(key);
    const want = ref.get(key);
    if (!want) {
      assert.equal(s, -1);
      continue;
    }
    assert.deepEqual([t.f64(s), t.f64(s, 1), t.u32[t.wordsAt(s)]], want);
  }
  const seen = [...t.slots()].map((s) => t.keyAt(s)).sort((a, b) => a - b);
  assert.deepEqual(seen, [...ref.keys()].sort((a, b) => a - b));
  assert.throws(() => t.insert(0), /empty mark/);
  t.clear();
  assert.equal(t.size, 0);
  assert.equal(t.find(pool[0]), -1);
});

Deno.test("num table: folded strings are equal for equal strings and spread for others", () => {
  assert.equal(foldString("-42"), foldString("-42"));
  const seen = new Set<number>();
  for (let i = 0; i < 100_000; i++) seen.add(foldString(String(i * 7919 - 50_000)));
  assert.equal(seen.size, 100_000);
  for (const v of seen) assert.ok(v >= 1 && v <= 2 ** 53 && Number.isInteger(v));
});

Deno.test("block index: more than 32 workers each keep their own depth", () => {
  const idx = new BlockIndex({ clock: new FakeClock() });
  const prompt = Array.from({ length: 80 }, (_, i) => i);
  for (let w = 0; w < 70; w++) {
    const n = 1 + (w % 20); // worker w holds the first n blocks of 4
    const blocks = Array.from({ length: n }, (_, b) => ({
      hash: `w${w}b${b}`,
      tokenIds: prompt.slice(b * 4, b * 4 + 4),
    }));
    assert.equal(idx.store(`w${w}`, null, blocks), null);
  }
  const m = idx.match(prompt);
  assert.equal(m.size, 70);
  for (let w = 0; w < 70; w++) assert.equal(m.get(`w${w}`), 4 * (1 + (w % 20)), `w${w}`);
  idx.clearWorker("w33");
  idx.clearWorker("w5");
  // A new worker takes a freed slot and starts empty.
  idx.store("late", null, [{ hash: "x", tokenIds: prompt.slice(0, 4) }]);
  const after = idx.match(prompt);
  assert.equal(after.has("w33"), false);
  assert.equal(after.has("w5"), false);
  assert.equal(after.get("late"), 4);
  assert.equal(after.get("w34"), 4 * 15);
  for (let w = 0; w < 70; w++) idx.clearWorker(`w${w}`);
  idx.clearWorker("late");
  assert.ok(idx.empty);
});
