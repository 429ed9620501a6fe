/**
 * Tree sharing at the policy level: path hashes cut at block boundaries, placements (bounded,
 * most recent first), a peer's delta routing the next turn of a conversation to the same worker,
 * the deeper of tree match and placement winning, deltas only while a sink is set, token
 * requests hashed by pages, repair entries rebuilding another instance, and removals purging.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { CacheAwarePolicy } from "../../../lib/policies/cache_aware/cache_aware.ts";
import {
  blockUnits,
  ladder,
  pathHashes,
  Placements,
  RecentPairs,
} from "../../../lib/policies/cache_aware/shared_paths.ts";
import { PolicyReplicas, type TreeRole } from "../../../lib/policies/replicas.ts";
import { request, view } from "../../../support/policies.ts";

interface Delta {
  role: TreeRole;
  model: string;
  kind: string;
  hash: number;
  tenant: string;
}

function router(role: TreeRole = "main") {
  const replicas = new PolicyReplicas();
  const deltas: Delta[] = [];
  replicas.deltaSink = (role, model, kind, hash, tenant) =>
    deltas.push({ role, model, kind, hash, tenant });
  const p = new CacheAwarePolicy({
    random: seededRandom(3),
    now: () => 0,
    log: silentLogger,
    config: defaultConfig(),
    replicas,
    role,
  });
  replicas.mainFor = () => p;
  return { p, deltas, replicas };
}

const w = (id: string, inFlight = 0) => view(id, { inFlight });
const SYSTEM = "You are the support assistant of tenant seven; answer briefly. ".repeat(4);

Deno.test("pathHashes: one hash per whole block, prefixes agree, empty below one block", () => {
  assert.deepEqual(pathHashes("abc", 4), []);
  const a = pathHashes("abcdefghij", 4);
  const b = pathHashes("abcdefgXYZ", 4);
  assert.equal(a.length, 2);
  assert.equal(a[0], b[0]);
  assert.notEqual(a[1], b[1]);
  assert.deepEqual(pathHashes([1, 2, 3, 4, 5], 2), pathHashes([1, 2, 3, 4, 9], 2));
  for (const h of a) assert.ok(Number.isSafeInteger(h) && h >= 0);
  assert.equal(blockUnits("string", 16), 64);
  assert.equal(blockUnits("token", 16), 16);
});

Deno.test("ladder: the deepest boundary, then 1, 2, 4, … blocks above it, down to the first", () => {
  assert.deepEqual(ladder(0), []);
  assert.deepEqual(ladder(1), [0]);
  assert.deepEqual(ladder(2), [1, 0]);
  assert.deepEqual(ladder(6), [5, 4, 3, 1, 0]);
  assert.deepEqual(ladder(12), [11, 10, 9, 7, 3, 0]);
  // Sharing the path down to any block b, the deepest rung at or above b lies no further above b
  // than b lies below the deepest boundary.
  for (let n = 1; n <= 300; n++) {
    const rungs = ladder(n);
    assert.ok(rungs.length <= Math.log2(n) + 3, `${n}: ${rungs.length} rungs`);
    for (let b = 0; b < n; b++) {
      const rung = Math.max(...rungs.filter((r) => r <= b));
      assert.ok(b - rung <= n - 1 - b, `n ${n}, b ${b}: rung ${rung}`);
    }
  }
});

Deno.test("Placements: most recent holder first, at most four, LRU-bounded, purge", () => {
  const p = new Placements(2);
  assert.equal(p.add(1, "a"), false);
  assert.equal(p.add(1, "b"), true);
  for (const t of ["c", "d", "e"]) p.add(1, t);
  assert.deepEqual([...p.entries()][0].tenants, ["e", "d", "c", "b"]);
  p.add(2, "x");
  p.deepest([1], 4, () => true); // touches 1: 2 is now the least recent
  p.add(3, "y");
  assert.deepEqual([...p.entries()].map((e) => e.hash), [1, 3]);
  p.removeTenant("y");
  assert.equal(p.has(3), false);
  assert.deepEqual(p.deepest([9, 1], 4, (t) => t === "c"), { depth: 8, tenants: ["c"] });
});

Deno.test("Placements: at the bound, the least recent sixteenth goes at once; RecentPairs", () => {
  const p = new Placements(64);
  for (let h = 0; h < 64; h++) p.add(h, "a");
  p.deepest([0], 4, () => true); // 0 is now the most recent
  p.add(64, "a");
  const held = [...p.entries()].map((e) => e.hash);
  assert.equal(held.length, 61, "64 − 4 + 1");
  assert.deepEqual(held.slice(0, 2), [5, 6]);
  assert.deepEqual(held.slice(-2), [0, 64]);
  assert.ok(p.holds(0, "a") && !p.holds(0, "b") && !p.holds(1, "a"));
  const r = new RecentPairs(1000);
  assert.equal(r.first(7, "a", 0), true);
  assert.equal(r.first(7, "a", 999), false, "again within the window");
  assert.equal(r.first(7, "b", 999), true, "another worker");
  assert.equal(r.first(7, "b", 999), false);
  assert.equal(r.first(7, "a", 1000), true, "the window is over");
});

Deno.test("shared trees: a conversation's next turn on another router goes to the same worker", () => {
  const a = router();
  const b = router();
  const turn1 = SYSTEM + "user: where is my order?";
  const pick = a.p.select([w("u1"), w("u2", 1)], request(turn1))!;
  assert.equal(pick.id, "u1");
  // The ladder of turn 1's boundaries, shallowest first (the deepest is the most recent).
  const hashes = pathHashes(turn1, 64);
  assert.deepEqual(
    a.deltas.map((d) => d.hash),
    ladder(hashes.length).reverse().map((i) => hashes[i]),
  );
  const d = a.deltas[a.deltas.length - 1];
  assert.deepEqual([d.role, d.model, d.kind, d.tenant], ["main", "m", "string", pick.url]);
  assert.equal(b.p.shared.applyDelta(d.model, "string", d.hash, d.tenant), false, "unknown on b");
  assert.equal(b.p.shared.applyDelta(d.model, "string", d.hash, d.tenant), true, "known after");
  // On b, u1 is now the busier worker: without the placement b would pick u2.
  const turn2 = turn1 + " assistant: it shipped. user: when does it arrive?";
  assert.equal(b.p.select([w("u1", 2), w("u2")], request(turn2))?.id, "u1");
  // b learnt the path in its own tree and published its decision back.
  assert.equal(b.deltas.length, ladder(pathHashes(turn2, 64).length).length);
  assert.deepEqual([...b.p.export("m")].map((e) => e.key), [turn2]);
});

Deno.test("shared trees: a next turn that does not extend the last one's tail still finds its worker", () => {
  const a = router();
  const b = router();
  // Turn 1 ends in a tail the next turn does not repeat (a generation prompt, a trace's partial
  // block): its deepest boundary lies in that tail, 3 blocks past what turn 2 shares.
  const shared = SYSTEM + "user: where is my order? ".repeat(4);
  const turn1 = shared + "<|assistant|>".repeat(15);
  const turn2 = shared + " assistant: it shipped. user: when does it arrive? ".repeat(2);
  assert.ok(pathHashes(turn1, 64).length - pathHashes(shared, 64).length >= 3);
  a.p.select([w("u1"), w("u2", 1)], request(turn1));
  const deepest = a.deltas[a.deltas.length - 1];
  b.p.shared.applyDelta("m", "string", deepest.hash, deepest.tenant);
  assert.equal(b.p.select([w("u1", 2), w("u2")], request(turn2))?.id, "u2", "the deepest alone");
  const c = router();
  for (const x of a.deltas) c.p.shared.applyDelta(x.model, "string", x.hash, x.tenant);
  assert.equal(c.p.select([w("u1", 2), w("u2")], request(turn2))?.id, "u1", "the ladder");
});

Deno.test("shared trees: a placement is ignored when its worker is not a candidate", () => {
  const a = router();
  const b = router();
  const turn1 = SYSTEM + "user: hi";
  a.p.select([w("u1"), w("u2", 1)], request(turn1));
  for (const d of a.deltas) b.p.shared.applyDelta(d.model, "string", d.hash, d.tenant);
  assert.equal(b.p.select([w("u2", 3), w("u3")], request(turn1 + " more"))?.id, "u3");
});

Deno.test("shared trees: the deeper of the local match and the placement wins", () => {
  const a = router();
  const b = router();
  // b's own tree knows the system prompt on u2; a's delta covers the whole first turn on u1.
  b.p.select([w("u2"), w("u1", 1)], request(SYSTEM + "user: other question"));
  const turn1 = SYSTEM + "user: where is my order? ".repeat(3);
  a.p.select([w("u1"), w("u2", 1)], request(turn1));
  for (const d of a.deltas) b.p.shared.applyDelta(d.model, "string", d.hash, d.tenant);
  assert.equal(b.p.select([w("u1"), w("u2")], request(turn1 + "and then?"))?.id, "u1");
});

Deno.test("shared trees: no sink, no hashing and no placements; short prompts publish nothing", () => {
  const p = new CacheAwarePolicy({
    random: seededRandom(3),
    now: () => 0,
    log: silentLogger,
    config: defaultConfig(),
  });
  p.select([w("u1")], request(SYSTEM));
  assert.deepEqual([...p.shared.exportTree("m", "string")].filter((e) => "hash" in e), []);
  const a = router();
  a.p.select([w("u1")], request("short"));
  assert.equal(a.deltas.length, 0);
});

Deno.test("shared trees: token requests publish page hashes to the token tree", () => {
  const a = router("prefill");
  const b = router("prefill");
  const tokens = Array.from({ length: 40 }, (_, i) => i + 1);
  a.p.select([w("u1"), w("u2", 1)], request("", { tokens }));
  assert.deepEqual(a.deltas.map((d) => [d.role, d.kind]), [["prefill", "token"], [
    "prefill",
    "token",
  ]]);
  assert.deepEqual(a.deltas.map((d) => d.hash), [
    pathHashes(tokens, 16)[0],
    pathHashes(tokens, 16)[1],
  ]);
  for (const d of a.deltas) b.p.shared.applyDelta(d.model, "token", d.hash, d.tenant);
  const next = [...tokens, 41, 42, 43];
  assert.equal(b.p.select([w("u1", 2), w("u2")], request("", { tokens: next }))?.id, "u1");
});

Deno.test("shared trees: a repair's entries rebuild the tree and placements elsewhere", () => {
  const a = router();
  const c = router();
  const turn1 = SYSTEM + "user: refund please";
  a.p.select([w("u1"), w("u2", 1)], request(turn1));
  a.p.shared.applyDelta("m", "string", 12345, "http://u9:8000");
  const entries = [...a.p.shared.exportTree("m", "string")];
  assert.equal(entries.filter((e) => "path" in e).length, 1);
  const rungs = ladder(pathHashes(turn1, 64).length).length;
  assert.equal(entries.filter((e) => "hash" in e).length, rungs + 1);
  for (const e of entries) c.p.shared.applyEntry("m", "string", e);
  assert.deepEqual([...c.p.shared.exportTree("m", "string")], entries);
  assert.equal(c.p.select([w("u1", 3), w("u2")], request(turn1 + " now"))?.id, "u1");
});

Deno.test("shared trees: a removed worker leaves the placements", () => {
  const a = router();
  const b = router();
  const turn1 = SYSTEM + "user: hello";
  const u1 = w("u1");
  a.p.select([u1, w("u2", 1)], request(turn1));
  for (const d of a.deltas) b.p.shared.applyDelta(d.model, "string", d.hash, d.tenant);
  b.p.select([u1], request("x".repeat(10))); // b learns u1's id
  b.p.onWorkerRemoved(u1.id);
  assert.deepEqual([...b.p.shared.exportTree("m", "string")].filter((e) => "hash" in e), []);
});

Deno.test("PolicyReplicas: resolves the model's policy through a sticky wrapper, and PD legs by role", () => {
  const r = new PolicyReplicas();
  const deps = {
    random: seededRandom(1),
    now: () => 0,
    log: silentLogger,
    config: defaultConfig(),
    replicas: r,
  };
  const main = new CacheAwarePolicy(deps);
  const prefill = new CacheAwarePolicy({ ...deps, role: "prefill" });
  r.mainFor = () => ({ inner: main } as never);
  assert.equal(r.treesFor("main", "m"), main.shared);
  assert.equal(r.treesFor("prefill", "m"), prefill.shared);
  assert.equal(r.treesFor("decode", "m"), null);
});

Deno.test("Placements: a holder keeps the time it was placed; eligibility sees it", () => {
  const p = new Placements();
  p.add(1, "a", 100);
  p.add(1, "b", 200);
  p.add(1, "a", 300); // placed again: most recent, at its new time
  const seen: [string, number][] = [];
  const m = p.deepest([1], 4, (t, at) => {
    seen.push([t, at]);
    return t === "b";
  });
  assert.deepEqual(seen, [["a", 300], ["b", 200]]);
  assert.deepEqual(m, { depth: 4, tenants: ["b"] });
  assert.equal(p.deepest([1], 4, () => false), null);
});
