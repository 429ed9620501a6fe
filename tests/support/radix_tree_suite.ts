/**
 * One behaviour suite for both cache_aware radix trees, run through the string drivers of
 * radix_tree_drivers.ts. Checks SMG's worked example of cache_aware's tree (a miss, a full hit,
 * a prefix inside the edge), splits, partial-edge matches, tenants of the deepest node, LRU
 * eviction, purge, the mesh hooks, and seeded random operations against a naive model (matches
 * and sizes) and the trees' own invariants.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import {
  type Match,
  naiveDepths,
  naiveMatch,
  randomText,
  type TreeUnderTest,
  trieSizes,
} from "./radix_tree_drivers.ts";

/** Runs the shared suite against trees made by `make`, test names prefixed by `name`. */
export function radixTreeSuite(name: string, make: () => TreeUnderTest): void {
  const test = (what: string, fn: () => void) => Deno.test(`${name}: ${what}`, fn);
  const first = (m: Match) => m.tenants[0] ?? "w1";

  test("the worked example: a miss, a full hit, then a prefix inside the edge", () => {
    const t = make();
    assert.deepEqual(t.matchAndInsert("hello world", first), {
      matched: 0,
      total: 11,
      tenants: [],
    });
    assert.deepEqual(t.matchAndInsert("hello world", first), {
      matched: 11,
      total: 11,
      tenants: ["w1"],
    });
    assert.deepEqual(t.matchAndInsert("hello", first), { matched: 5, total: 5, tenants: ["w1"] });
    assert.deepEqual(t.audit(), []);
  });

  test("a diverging insert splits the edge; matches stop inside edges", () => {
    const t = make();
    t.insert("hello world", "A");
    t.insert("help", "B");
    assert.equal(t.nodeCount(), 4, "root, 'hel', 'lo world', 'p'");
    assert.deepEqual(t.match("help me"), { matched: 4, total: 7, tenants: ["B"] });
    assert.deepEqual(t.match("hel"), { matched: 3, total: 3, tenants: ["B", "A"] });
    assert.deepEqual(t.match("he"), { matched: 2, total: 2, tenants: ["B", "A"] });
    assert.deepEqual(t.match("hello there"), { matched: 6, total: 11, tenants: ["A"] });
    assert.deepEqual(t.match("xyz"), { matched: 0, total: 3, tenants: [] });
    assert.equal(t.tenantSize("A"), 11);
    assert.equal(t.tenantSize("B"), 4);
    assert.equal(t.size(), 15);
    t.insert("hello world", "B");
    assert.equal(t.tenantSize("B"), 12);
    t.insert("hello world", "B");
    assert.equal(t.size(), 23, "a repeated insert adds nothing");
    assert.deepEqual(t.audit(), []);
  });

  test("inserting a prefix of an edge splits it without a new leaf", () => {
    const t = make();
    t.insert("abcdef", "A");
    t.insert("abc", "B");
    assert.equal(t.nodeCount(), 3);
    assert.deepEqual(t.match("abcx"), { matched: 3, total: 4, tenants: ["B", "A"] });
    assert.deepEqual(t.match("abcd"), { matched: 4, total: 4, tenants: ["A"] });
    assert.equal(t.size(), 9);
  });

  test("tenants of the deepest node: most recent first, at most 8", () => {
    const t = make();
    for (let i = 0; i < 10; i++) t.insert("shared prefix", `t${i}`);
    assert.deepEqual(t.match("shared").tenants, ["t9", "t8", "t7", "t6", "t5", "t4", "t3", "t2"]);
    t.matchAndInsert("shared prefix", () => "t0");
    assert.deepEqual(t.match("shared prefix").tenants.slice(0, 2), ["t0", "t9"]);
  });

  test("the chooser sees the match; null inserts nothing and skips the sink", () => {
    const t = make();
    t.insert("abc", "A");
    const seen: Match[] = [];
    const m = t.matchAndInsert("abd", (match) => (seen.push(match), null));
    assert.deepEqual(seen, [m]);
    assert.deepEqual(m, t.match("abd"));
    assert.equal(t.nodeCount(), 2);
    assert.deepEqual(t.sunk, ["abc@A"]);
    t.matchAndInsert("abd", () => "B");
    t.apply("xyz", "C");
    assert.deepEqual(t.sunk, ["abc@A", "abd@B"], "apply does not call the sink");
    assert.deepEqual(t.match("xyz").tenants, ["C"]);
  });

  test("eviction is LRU over tenant leaves; a recently matched prefix survives", () => {
    const t = make();
    t.insert("abcd", "A");
    t.insert("bbbb", "B");
    t.insert("cccc", "C");
    t.matchAndInsert("abcd", () => "A"); // refreshes A's whole path
    assert.equal(t.evict(8), 4);
    assert.equal(t.match("bbbb").matched, 0);
    assert.deepEqual(t.match("abcd").tenants, ["A"]);
    assert.equal(t.evict(4), 4);
    assert.equal(t.match("cccc").matched, 0);
    assert.equal(t.match("abcd").matched, 4);
    assert.equal(t.evict(100), 0, "under budget: nothing to do");
    assert.deepEqual(t.audit(), []);
  });

  test("eviction takes a tenant's leaves before the inner nodes they hang from", () => {
    const t = make();
    t.insert("abcd", "A");
    t.insert("abxy", "A");
    t.matchAndInsert("ab", () => "A"); // the inner node is the newest, yet goes last
    assert.equal(t.evict(4), 2);
    assert.equal(t.match("abcd").matched, 2);
    assert.equal(t.match("abxy").matched, 4);
    assert.equal(t.evict(2), 2);
    assert.deepEqual(t.match("abxy"), { matched: 2, total: 4, tenants: ["A"] });
    assert.equal(t.nodeCount(), 2, "emptied nodes are pruned");
    assert.equal(t.evict(0), 2);
    assert.equal(t.nodeCount(), 1);
    assert.deepEqual(t.tenants(), ["A"], "the root keeps its tenants");
  });

  test("a repeated request refreshes every node on its path", () => {
    const t = make();
    t.insert("abcd", "A");
    t.insert("abq", "B"); // splits off "ab"; B's stamp on it is fresh, not 0
    t.insert("zzzz", "C");
    t.matchAndInsert("abq", (m) => m.tenants[0]); // B again: "ab" and "q" both refreshed
    assert.equal(t.evict(t.size() - 2), 2);
    assert.equal(t.match("abcd").matched, 2, "A's leaf went first");
    assert.equal(t.evict(t.size() - 2), 2);
    assert.deepEqual(t.match("abcd").tenants, ["B"], "then A's inner node, now its leaf");
    assert.equal(t.evict(t.size() - 1), 4);
    assert.equal(t.match("zzzz").matched, 0, "then C, older than B's refreshed leaf");
    assert.deepEqual(t.match("abq"), { matched: 3, total: 3, tenants: ["B"] });
  });

  test("evict holds the budget and keeps the invariants", () => {
    const random = seededRandom(7);
    const t = make();
    for (let i = 0; i < 300; i++) {
      t.insert(randomText(random, "abcd", 16), `w${Math.floor(random() * 5)}`);
    }
    for (const budget of [1000, 500, 120, 33, 1, 0]) {
      const before = t.size();
      const removed = t.evict(budget);
      assert.ok(t.size() <= budget, `size ${t.size()} over budget ${budget}`);
      assert.equal(before - removed, t.size());
      assert.deepEqual(t.audit(), []);
    }
    assert.equal(t.nodeCount(), 1);
  });

  test("forgetBeyond drops the stale branch below the reported depth, keeps fresh and off-path ones", () => {
    const t = make();
    const S = "system:";
    t.insert(`${S}A-old-P`, "w1"); // stale, under A beyond the depth
    t.insert(`${S}B-off`, "w1"); // off the path: hangs at the depth, not beyond it
    t.insert(`${S}A-old-Q`, "w1"); // stale too
    t.insert(`${S}A-old-P`, "w2"); // another tenant on the same nodes
    t.insert(`${S}A-new`, "w1"); // the request whose answer reports only S cached
    const before = t.stamp();
    const sizeBefore = t.tenantSize("w1");
    const stale: string[] = [];
    const removed = t.forgetBeyond(
      `${S}A-new`,
      "w1",
      S.length,
      before,
      (path, from) => stale.push(`${path}@${from}`),
    );
    assert.equal(removed, "old-".length + "P".length + "Q".length, "the stale branch below A-");
    assert.deepEqual(
      stale.sort(),
      [`${S}A-old-P@${S.length + 2}`, `${S}A-old-Q@${S.length + 2}`],
      "each forgotten leaf's whole path, and where the forgotten part starts",
    );
    assert.equal(t.tenantSize("w1"), sizeBefore - removed);
    assert.equal(t.depths(`${S}A-old-P`).get("w1"), `${S}A-`.length);
    assert.equal(t.depths(`${S}A-old-P`).get("w2"), `${S}A-old-P`.length, "w2 untouched");
    assert.equal(t.depths(`${S}A-new`).get("w1"), `${S}A-new`.length, "the fresh path stays");
    assert.equal(t.depths(`${S}B-off`).get("w1"), `${S}B-off`.length, "off-path branch stays");
    assert.deepEqual(t.audit(), []);
  });

  test("forgetBeyond inside an edge splits it; a later stamp, an absent path or a miss remove nothing", () => {
    const t = make();
    t.insert("abcdefgh", "w1");
    t.insert("abcdefXY", "w1");
    const before = t.stamp() + 1; // everything so far is stale
    assert.equal(t.forgetBeyond("abcdefgh", "w1", 3, before), "defgh".length + "XY".length);
    assert.equal(t.depths("abcdefgh").get("w1"), 3, "cut inside the shared edge");
    assert.deepEqual(t.audit(), []);
    assert.equal(t.forgetBeyond("abc", "w1", 3, before), 0, "nothing of it beyond the depth");
    assert.equal(t.forgetBeyond("zzz", "w1", 1, before), 0, "a path the tree does not hold");
    assert.equal(t.forgetBeyond("abcdefgh", "w9", 1, before), 0, "an unknown tenant");
    t.insert("abcQ", "w1");
    assert.equal(t.forgetBeyond("abcQ", "w1", 3, t.stamp()), 0, "fresh since the stamp");
    assert.equal(t.depths("abcQ").get("w1"), 4);
    assert.deepEqual(t.audit(), []);
  });

  test("removeTenant leaves no trace and keeps the others", () => {
    const t = make();
    t.insert("shared system prompt: conversation one", "A");
    t.insert("shared system prompt: conversation two", "B");
    t.insert("private to A", "A");
    t.insert("shared system prompt: conversation two", "A");
    const bSize = t.tenantSize("B");
    t.removeTenant("A");
    assert.deepEqual(t.tenants(), ["B"]);
    assert.equal(t.tenantSize("A"), 0);
    assert.equal(t.tenantSize("B"), bSize);
    assert.equal(t.size(), bSize);
    assert.equal(t.match("private to A").matched, 0);
    assert.deepEqual(t.match("shared system prompt: conversation one").tenants, ["B"]);
    assert.ok(t.entries().every((e) => e.tenant === "B"));
    assert.deepEqual(t.audit(), []);
    t.removeTenant("B");
    t.removeTenant("never seen");
    assert.equal(t.size(), 0);
    assert.equal(t.nodeCount(), 1);
    assert.deepEqual(t.tenants(), []);
  });

  test("random inserts and removals agree with a naive model", () => {
    const random = seededRandom(42);
    const t = make();
    const model = new Map<string, Map<string, number>>();
    for (let step = 0; step < 400; step++) {
      const tenant = `w${Math.floor(random() * 6)}`;
      if (random() < 0.03) {
        t.removeTenant(tenant);
        model.delete(tenant);
      } else {
        const text = randomText(random, "ab c", 12);
        const m = t.matchAndInsert(text, () => tenant);
        assert.deepEqual(m, naiveMatch(model, text), `step ${step}: ${text}`);
        model.set(tenant, (model.get(tenant) ?? new Map()).set(text, step));
      }
      const query = randomText(random, "ab c", 14);
      assert.deepEqual(t.match(query), naiveMatch(model, query), `step ${step}: ${query}`);
      assert.deepEqual(t.depths(query), naiveDepths(model, query), `depths ${step}: ${query}`);
      const all = [...model].flatMap(([tenant, texts]) =>
        [...texts.keys()].map((text) => ({ text, tenant }))
      );
      const sizes = trieSizes(all);
      for (const tenant of model.keys()) assert.equal(t.tenantSize(tenant), sizes.get(tenant) ?? 0);
      assert.deepEqual(t.audit(), [], `step ${step}`);
    }
  });

  test("random operations with eviction keep sizes equal to the exported paths'", () => {
    const random = seededRandom(3);
    const t = make();
    for (let step = 0; step < 600; step++) {
      const r = random();
      const tenant = `w${Math.floor(random() * 8)}`;
      const text = randomText(random, "abc", 10);
      if (r < 0.5) t.insert(text, tenant);
      else if (r < 0.8) t.matchAndInsert(text, (m) => m.tenants[0] ?? tenant);
      else if (r < 0.97) t.evict(Math.floor(random() * t.size()));
      else t.removeTenant(tenant);
      assert.deepEqual(t.audit(), [], `step ${step}`);
      const sizes = trieSizes(t.entries());
      let total = 0;
      for (const tenant of t.tenants()) {
        assert.equal(t.tenantSize(tenant), sizes.get(tenant) ?? 0, `step ${step}, ${tenant}`);
        total += t.tenantSize(tenant);
      }
      assert.equal(t.size(), total);
    }
  });

  test("export, applied to a fresh tree, reproduces every match", () => {
    const random = seededRandom(11);
    const t = make();
    for (let i = 0; i < 400; i++) {
      t.insert(randomText(random, "abcd", 12), `w${Math.floor(random() * 6)}`);
      if (i % 50 === 49) t.evict(t.size() * 0.7);
    }
    t.removeTenant("w3");
    const entries = t.entries();
    assert.ok(entries.every((e, i) => i === 0 || entries[i - 1].stamp <= e.stamp), "oldest first");
    const copy = make();
    for (const e of entries) copy.apply(e.text, e.tenant);
    assert.deepEqual(copy.sunk, []);
    assert.equal(copy.size(), t.size());
    assert.deepEqual(copy.tenants().sort(), t.tenants().sort());
    for (const tenant of t.tenants()) assert.equal(copy.tenantSize(tenant), t.tenantSize(tenant));
    for (let i = 0; i < 500; i++) {
      const q = randomText(random, "abcd", 14);
      const [a, b] = [t.match(q), copy.match(q)];
      assert.equal(b.matched, a.matched, q);
      assert.deepEqual(new Set(b.tenants), new Set(a.tenants), q);
    }
  });
}
