import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { pageKey, TokenTree } from "../../../lib/policies/cache_aware/token_tree.ts";
import type { PrefixMatch } from "../../../lib/policies/cache_aware/tree_types.ts";
import type { Match } from "../../support/radix_tree_drivers.ts";
import { randomText, stringTree, tokenTree } from "../../support/radix_tree_drivers.ts";
import { radixTreeSuite } from "../../support/radix_tree_suite.ts";

radixTreeSuite("TokenTree (page 1)", () => tokenTree(1));
radixTreeSuite("TokenTree (page 4)", () => tokenTree(4));

const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

Deno.test("TokenTree: matches are whole pages over the full input length", () => {
  const t = new TokenTree({ pageSize: 16 });
  assert.equal(t.pageSize, 16);
  t.insert(ids(32), "w1");
  assert.deepEqual(t.match(ids(40)), { matched: 32, total: 40, tenants: ["w1"] });
  const diverging = ids(40);
  diverging[20] = 999; // inside the second page
  assert.deepEqual(t.match(diverging), { matched: 16, total: 40, tenants: ["w1"] });
  diverging[3] = 999; // inside the first page
  assert.deepEqual(t.match(diverging), { matched: 0, total: 40, tenants: [] });
});

Deno.test("TokenTree: inputs are truncated to whole pages; a split falls on a page boundary", () => {
  const t = new TokenTree({ pageSize: 16 });
  t.insert(ids(40), "A");
  assert.equal(t.size, 32);
  assert.equal(t.nodeCount, 2);
  const other = ids(48);
  other[20] = 999;
  t.insert(other, "B");
  assert.equal(t.nodeCount, 4, "root, first page, then A's and B's second pages");
  assert.equal(t.tenantSize("B"), 48);
  assert.deepEqual(t.match(ids(16)), { matched: 16, total: 16, tenants: ["B", "A"] });
  assert.deepEqual(t.match(other), { matched: 48, total: 48, tenants: ["B"] });
  assert.deepEqual(t.audit(), []);
});

Deno.test("TokenTree: a sequence shorter than a page is never inserted", () => {
  const sunk: string[] = [];
  const t = new TokenTree({ pageSize: 16, onInsert: (_, tenant) => sunk.push(tenant) });
  t.insert(ids(15), "A");
  t.apply(ids(15), "A");
  t.insert([], "A");
  const seen: PrefixMatch[] = [];
  const r = t.matchAndInsert(ids(15), (m) => (seen.push(m), "A"));
  assert.deepEqual(r, { match: { matched: 0, total: 15, tenants: [] }, tenant: "A" });
  assert.deepEqual(seen, [r.match]);
  assert.deepEqual(t.tenants(), [], "not even registered at the root");
  assert.equal(t.size, 0);
  assert.equal(t.nodeCount, 1);
  assert.deepEqual(sunk, []);
  t.insert(ids(16), "A");
  assert.deepEqual(t.match(ids(15)), { matched: 0, total: 15, tenants: [] });
  assert.deepEqual(sunk, ["A"]);
});

Deno.test("TokenTree: pages with colliding keys are told apart", () => {
  // Find two different 2-token pages with the same 30-bit key.
  const seen = new Map<number, number>();
  let pair: [number, number] | null = null;
  for (let i = 0; pair === null; i++) {
    const k = pageKey([7, i], 0, 2);
    const j = seen.get(k);
    if (j !== undefined) pair = [j, i];
    else seen.set(k, i);
  }
  const [a, b] = [[7, pair[0], 1, 2], [7, pair[1], 3, 4]];
  assert.equal(pageKey(a, 0, 2), pageKey(b, 0, 2));
  const t = new TokenTree({ pageSize: 2 });
  t.insert(a, "A");
  t.insert(b, "B");
  assert.equal(t.nodeCount, 3);
  assert.deepEqual(t.match(a), { matched: 4, total: 4, tenants: ["A"] });
  assert.deepEqual(t.match(b), { matched: 4, total: 4, tenants: ["B"] });
  assert.deepEqual(t.match([7, pair[1], 1, 2]), { matched: 2, total: 4, tenants: ["B"] });
  t.insert([...a.slice(0, 2), 9, 9], "C"); // splits the first chained node
  assert.deepEqual(t.match(a).tenants, ["A"]);
  assert.deepEqual(t.match(b).tenants, ["B"]);
  assert.deepEqual(t.audit(), []);
  t.removeTenant("A");
  t.removeTenant("C");
  assert.deepEqual(t.match(b), { matched: 4, total: 4, tenants: ["B"] });
  assert.equal(t.match(a).matched, 0);
  assert.equal(t.nodeCount, 2);
  assert.deepEqual(t.audit(), []);
});

Deno.test("TokenTree: behaves like StringTree under random operations with eviction", () => {
  const random = seededRandom(5);
  const page = 3;
  const [s, k] = [stringTree(), tokenTree(page)];
  for (let step = 0; step < 800; step++) {
    const r = random();
    const tenant = `w${Math.floor(random() * 8)}`;
    const text = randomText(random, "abcde", 12);
    if (r < 0.6) {
      const choose = (m: Match) => m.tenants[0] ?? tenant;
      assert.deepEqual(k.matchAndInsert(text, choose), s.matchAndInsert(text, choose), `${step}`);
    } else if (r < 0.8) assert.deepEqual(k.match(text), s.match(text), `${step}`);
    else if (r < 0.97) {
      const budget = Math.floor(random() * s.size());
      assert.equal(k.evict(budget), s.evict(budget), `${step}`);
    } else {
      s.removeTenant(tenant);
      k.removeTenant(tenant);
    }
    assert.equal(k.size(), s.size());
    assert.equal(k.nodeCount(), s.nodeCount());
  }
  assert.deepEqual(k.entries(), s.entries());
  assert.deepEqual(k.audit(), []);
});

Deno.test("TokenTree: the page size must be a positive integer", () => {
  assert.equal(new TokenTree().pageSize, 16);
  for (const pageSize of [0, -16, 1.5, NaN]) {
    assert.throws(() => new TokenTree({ pageSize }), RangeError);
  }
});
