import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { StringTree } from "../../../lib/policies/cache_aware/string_tree.ts";
import { randomText, stringTree } from "../../support/radix_tree_drivers.ts";
import { radixTreeSuite } from "../../support/radix_tree_suite.ts";

radixTreeSuite("StringTree", stringTree);

Deno.test("StringTree: the empty text registers a tenant at the root only", () => {
  const t = new StringTree();
  t.insert("", "w1");
  assert.deepEqual(t.tenants(), ["w1"]);
  assert.equal(t.size, 0);
  assert.equal(t.nodeCount, 1);
  assert.deepEqual(t.match(""), { matched: 0, total: 0, tenants: [] });
  assert.deepEqual(t.match("x"), { matched: 0, total: 1, tenants: [] });
  assert.deepEqual([...t.export()].map((e) => [e.text, e.tenant]), [["", "w1"]]);
  assert.equal(t.evict(0), 0);
  assert.deepEqual(t.tenants(), ["w1"], "the root is never evicted");
});

Deno.test("StringTree: lengths are UTF-16 code units; a split inside a surrogate pair is harmless", () => {
  const t = new StringTree();
  t.insert("😀 smile", "A");
  t.insert("😁 grin", "B"); // shares only the high surrogate with the first
  assert.deepEqual(t.match("😀 smile"), { matched: 8, total: 8, tenants: ["A"] });
  assert.deepEqual(t.match("😁"), { matched: 2, total: 2, tenants: ["B"] });
  assert.deepEqual(t.match("😂"), { matched: 1, total: 2, tenants: ["B", "A"] });
  assert.deepEqual([...t.export()].map((e) => e.text).sort(), ["😀 smile", "😁 grin"]);
  assert.deepEqual(t.audit(), []);
});

Deno.test("StringTree: long texts match and split anywhere", () => {
  const base = "system prompt. ".repeat(7000);
  const t = new StringTree();
  t.insert(base + "question one", "A");
  t.insert(base + "question two", "B");
  assert.deepEqual(t.match(base + "question three"), {
    matched: base.length + 10,
    total: base.length + 14,
    tenants: ["B"],
  });
  assert.equal(t.match(base.slice(0, 5000)).tenants.length, 2);
  assert.equal(t.size, 2 * base.length + 2 * 9 + 2 * 3);
});

Deno.test("StringTree: onInsert can be set after construction", () => {
  const t = new StringTree();
  const seen: string[] = [];
  t.insert("before", "A");
  t.onInsert = (text, tenant) => seen.push(`${text}@${tenant}`);
  t.insert("after", "A");
  t.matchAndInsert("chosen", () => "B");
  assert.deepEqual(seen, ["after@A", "chosen@B"]);
});

Deno.test("StringTree: long shared runs diverging anywhere match to the exact character", () => {
  const random = seededRandom(9);
  const base = randomText(random, "abcdefgh", 1) + randomText(random, "abcdefgh", 3000);
  const variant = () =>
    base.slice(0, Math.floor(random() * base.length)) + randomText(random, "xyz", 40);
  const t = new StringTree();
  const inserted: string[] = [];
  for (let i = 0; i < 60; i++) {
    const text = variant();
    t.insert(text, `w${i % 5}`);
    inserted.push(text);
  }
  for (let i = 0; i < 200; i++) {
    const q = i % 2
      ? variant()
      : inserted[i % inserted.length].slice(0, Math.floor(random() * 3000));
    let best = 0;
    for (const s of inserted) {
      let k = 0;
      while (k < s.length && k < q.length && s[k] === q[k]) k++;
      best = Math.max(best, k);
    }
    assert.equal(t.match(q).matched, best, `query ${i}`);
  }
  assert.deepEqual(t.audit(), []);
});

Deno.test("StringTree: a lazy export skips leaves pruned while it runs, never yielding cut paths", () => {
  const random = seededRandom(11);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)];
  for (let trial = 0; trial < 200; trial++) {
    const t = new StringTree();
    const texts: string[] = [];
    for (let i = 0; i < 12; i++) {
      const text = pick(["AAAA", "AAAB", "BBBB"]) + pick(["CCCC", "CCCD", "DDDD"]) +
        pick(["E", "F", "G"]);
      texts.push(text);
      t.insert(text, `w${i % 4}`);
    }
    const it = t.export("path")[Symbol.iterator]();
    for (let k = Math.floor(random() * 4); k > 0; k--) it.next();
    t.removeTenant(pick(["w0", "w1", "w2", "w3"]));
    if (random() < 0.5) t.evict(t.size / 2);
    const rest = [...{ [Symbol.iterator]: () => it }].map((e) => e.text);
    // Eviction may leave a prefix as a leaf: a path from the root, but never a cut one.
    for (const x of rest) {
      assert.ok(texts.some((y) => y.startsWith(x)), `trial ${trial}: cut path '${x}'`);
    }
  }
});
