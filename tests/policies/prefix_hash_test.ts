import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import type { RouteRequest, WorkerView } from "../../lib/core/types.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import {
  loadOk,
  PrefixHashPolicy,
  type PrefixKeyOptions,
  prefixKeys,
} from "../../lib/policies/prefix_hash.ts";
import { deps, request, tally, view, views } from "../../support/policies.ts";

interface Tuning {
  prefixTokenCount?: number;
  loadFactor?: number;
  balanceAbsThreshold?: number;
  boundaries?: number[];
}

/** A policy with `tuning` whose decisions are recorded in `branches`. */
function policy(t: Tuning = {}) {
  const d = deps();
  d.config.prefixHash = { ...d.config.prefixHash, ...t };
  d.config.cacheBoundaries = t.boundaries ?? [];
  const branches: string[] = [];
  d.observer = {
    decision: (_p, b) => branches.push(b),
    stickyEntries: () => {},
    keySource: () => {},
  };
  return { p: new PrefixHashPolicy(d), branches };
}

const toks = (tokens: number[], text = "") => request(text, { tokens });
const seq = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
const opts = (prefixTokenCount: number, boundaries: number[] = []): PrefixKeyOptions => ({
  prefixTokenCount,
  boundaries,
});
const hashes = (r: RouteRequest, o: PrefixKeyOptions) => prefixKeys(r, o).map((k) => k.hash);
const depths = (r: RouteRequest, o: PrefixKeyOptions) => prefixKeys(r, o).map((k) => k.depth);

Deno.test("prefix_hash: name, needs and defaults", () => {
  const { p } = policy();
  assert.equal(p.name, "prefix_hash");
  assert.deepEqual(p.needs, { requestText: true, backendLoads: false });
  // The absolute margin is on by default.
  assert.deepEqual(defaultConfig().prefixHash, {
    prefixTokenCount: 256,
    loadFactor: 1.25,
    balanceAbsThreshold: 10,
  });
});

Deno.test("prefix_hash: no candidates → null; nothing to hash → least loaded", () => {
  const { p, branches } = policy();
  assert.equal(p.select([], toks([1, 2])), null);
  const cands = [
    view("a", { inFlight: 3 }),
    view("b", { inFlight: 1 }),
    view("c", { inFlight: 1 }),
  ];
  assert.equal(p.select(cands, request(""))?.id, "b");
  assert.equal(p.select(cands, request("", { tokens: [] }))?.id, "b");
  assert.deepEqual(branches, ["no_healthy_workers", "no_routing_key", "no_routing_key"]);
});

Deno.test("loadOk: both margins must be exceeded to refuse", () => {
  const table: { load: number; total: number; n: number; f: number; abs: number; ok: boolean }[] = [
    // total 100 over 4, factor 1.25, abs 0: threshold (101/4) × 1.25 = 31.5625.
    { load: 30, total: 100, n: 4, f: 1.25, abs: 0, ok: true },
    { load: 31.5625, total: 100, n: 4, f: 1.25, abs: 0, ok: true },
    { load: 32, total: 100, n: 4, f: 1.25, abs: 0, ok: false },
    { load: 35, total: 100, n: 4, f: 1.25, abs: 0, ok: false },
    // Nothing in flight anywhere: always fine.
    { load: 0, total: 0, n: 4, f: 1.25, abs: 0, ok: true },
    // avg 10.25 (total 40): the absolute margin (+10 → 20.25) absorbs small-count noise.
    { load: 13, total: 40, n: 4, f: 1.25, abs: 10, ok: true },
    { load: 20, total: 40, n: 4, f: 1.25, abs: 10, ok: true },
    { load: 21, total: 40, n: 4, f: 1.25, abs: 10, ok: false },
    // avg 200.25 (total 800): the relative margin (250.3125) still binds at high load.
    { load: 240, total: 800, n: 4, f: 1.25, abs: 10, ok: true },
    { load: 260, total: 800, n: 4, f: 1.25, abs: 10, ok: false },
    // One worker holds everything: its load is total < (total + 1) × factor.
    { load: 50, total: 50, n: 1, f: 1, abs: 0, ok: true },
  ];
  for (const { load, total, n, f, abs, ok } of table) {
    assert.equal(
      loadOk(load, total, n, { loadFactor: f, balanceAbsThreshold: abs }),
      ok,
      `${load}/${total}`,
    );
  }
});

Deno.test("prefix_hash: same tokens → same worker; different prefixes spread", () => {
  const { p, branches } = policy();
  const cands = views(4);
  const home = p.select(cands, toks([5, 6, 7, 8]));
  for (let i = 0; i < 10; i++) assert.equal(p.select(cands, toks([5, 6, 7, 8])), home);
  const t = tally(Array.from({ length: 1000 }, (_, i) => p.select(cands, toks([i, i * 7, 3]))));
  assert.equal(t.size, 4);
  for (const [id, c] of t) assert.ok(c > 170 && c < 330, `${id}: ${c}`);
  assert.ok(branches.every((b) => b === "ring_hit"));
});

Deno.test("prefix_hash: only the first prefix_token_count tokens count", () => {
  const { p } = policy({ prefixTokenCount: 4 });
  const cands = views(8);
  for (let k = 0; k < 50; k++) {
    const head = [k, 1, 2, 3];
    const a = p.select(cands, toks([...head, 100, 101]));
    assert.equal(p.select(cands, toks([...head, 900])), a);
    assert.equal(p.select(cands, toks(head)), a);
  }
  assert.notDeepEqual(hashes(toks([1, 2, 3]), opts(4)), hashes(toks([1, 2, 4]), opts(4)));
});

Deno.test("prefix_hash: text keys on 4 × prefix_token_count characters", () => {
  const { p } = policy({ prefixTokenCount: 2 });
  const cands = views(8);
  for (let k = 0; k < 50; k++) {
    const head = `pfx${String(k).padStart(5, "0")}`; // 8 characters = 2 tokens
    const a = p.select(cands, request(`${head} tail one`));
    assert.equal(p.select(cands, request(`${head} other tail`)), a);
    assert.equal(p.select(cands, request(head)), a);
  }
  const o = opts(2);
  assert.notDeepEqual(hashes(request("abcdefgh"), o), hashes(request("abcdefgX"), o));
});

Deno.test("prefix_hash: the character budget counts code points and never splits one", () => {
  const o = opts(1); // 4 characters
  const same = [
    ["ééééX", "ééééY"],
    ["😀😀😀😀a", "😀😀😀😀b"],
    ["a😀b😀", "a😀b😀c"],
  ];
  for (const [x, y] of same) assert.deepEqual(hashes(request(x), o), hashes(request(y), o), x);
  assert.notDeepEqual(hashes(request("😀😀😀a"), o), hashes(request("😀😀😀b"), o));
  // With boundaries the text depth is 4 × b code points too.
  const ob = opts(256, [1]);
  assert.deepEqual(depths(request("😀😀😀😀z"), ob), [1]);
  assert.deepEqual(hashes(request("😀😀😀😀z"), ob), hashes(request("😀😀😀😀"), ob));
  assert.deepEqual(depths(request("😀😀😀"), ob), [0]);
});

Deno.test("prefix_hash: routing key > tokens > text", () => {
  const o = opts(256);
  const byTokens = hashes(toks([1, 2, 3], "text A"), o);
  assert.deepEqual(hashes(toks([1, 2, 3], "text B"), o), byTokens);
  assert.notDeepEqual(hashes(request("text A"), o), byTokens);
  const byKey = hashes(request("text A", { tokens: [1, 2, 3], routingKey: "user-1" }), o);
  assert.deepEqual(hashes(request("other", { tokens: [9], routingKey: "user-1" }), o), byKey);
  assert.deepEqual(byKey.length, 1);
  // A routing key ignores boundaries.
  assert.deepEqual(depths(request("", { tokens: seq(100), routingKey: "k" }), opts(8, [16, 32])), [
    0,
  ]);
  // The routing key routes consistently and spreads.
  const { p } = policy();
  const cands = views(4);
  for (let k = 0; k < 30; k++) {
    const a = p.select(cands, request(`x${k}`, { routingKey: `user-${k}` }));
    assert.equal(p.select(cands, request(`y${k}`, { tokens: [k], routingKey: `user-${k}` })), a);
  }
  const t = tally(
    Array.from(
      { length: 800 },
      (_, k) => p.select(cands, request("same", { routingKey: `u${k}` })),
    ),
  );
  assert.equal(t.size, 4);
});

Deno.test("prefix_hash: cache boundaries, deepest applicable first", () => {
  const o = opts(8, [32, 64]);
  const base = seq(64);
  const a = toks([...base, ...seq(6, 1000)]); // 70 tokens
  const b = toks([...base, ...seq(36, 2000)]); // 100 tokens
  assert.deepEqual(depths(a, o), [64, 32]);
  assert.deepEqual(hashes(a, o), hashes(b, o));
  // Below the smallest boundary: fixed-depth keying (first 8 tokens), as without boundaries.
  const short = toks(seq(20));
  assert.deepEqual(depths(short, o), [0]);
  assert.deepEqual(hashes(short, o), hashes(toks(seq(12)), opts(8)));
  // Unset boundaries: a single fixed-depth key.
  assert.deepEqual(depths(a, opts(8)), [0]);
  assert.deepEqual(hashes(a, opts(8)), hashes(toks(seq(8)), opts(8)));
  // A short turn and its long follow-up share the key at their common boundary.
  const turn1 = seq(40);
  const turn2 = [...turn1, ...seq(60, 500)];
  const k1 = prefixKeys(toks(turn1), o);
  const k2 = prefixKeys(toks(turn2), o);
  assert.deepEqual(k1.map((k) => k.depth), [32]);
  assert.deepEqual(k2.map((k) => k.depth), [64, 32]);
  assert.equal(k2[1].hash, k1[0].hash);
});

Deno.test("prefix_hash: text boundaries at 4 × b characters", () => {
  const o = opts(256, [8, 16]);
  const head = "0123456789abcdefghijklmnopqrstuv"; // 32 characters = boundary 8
  assert.deepEqual(depths(request(head + "xyz"), o), [8]);
  assert.deepEqual(hashes(request(head + "xyz"), o), hashes(request(head + "other"), o));
  const long = head + "W".repeat(40);
  assert.deepEqual(depths(request(long), o), [16, 8]);
  assert.equal(prefixKeys(request(long), o)[1].hash, prefixKeys(request(head), o)[0].hash);
  assert.deepEqual(depths(request("short text"), o), [0]);
});

Deno.test("prefix_hash: an overloaded deep target retries the shallower boundary", () => {
  const cands = views(6);
  // Find a conversation whose depth-64 and depth-32 keys live on different workers.
  const { p: probe } = policy({ boundaries: [32, 64] });
  let found: { tokens: number[]; deep: string; shallow: string } | null = null;
  for (let s = 0; s < 100 && !found; s++) {
    const tokens = seq(80, s * 1000);
    const deep = probe.select(cands, toks(tokens))!.id;
    const shallow = probe.select(cands, toks(tokens.slice(0, 40)))!.id;
    if (deep !== shallow) found = { tokens, deep, shallow };
  }
  assert.ok(found);
  const busy = cands.map((c) => c.id === found.deep ? view(c.id, { inFlight: 40 }) : c);
  const { p, branches } = policy({ boundaries: [32, 64] });
  assert.equal(p.select(busy, toks(found.tokens))?.id, found.shallow);
  assert.deepEqual(branches, ["ring_hit"]);
});

Deno.test("prefix_hash: all ring targets busy → least loaded (load_balance_walk)", () => {
  const { p: probe } = policy({ loadFactor: 1.25, balanceAbsThreshold: 0 });
  const cands = views(4);
  const home = probe.select(cands, toks([1, 2, 3]))!.id;
  const loaded = cands.map((c, i) => view(c.id, { inFlight: c.id === home ? 50 : 5 + i }));
  const { p, branches } = policy({ loadFactor: 1.25, balanceAbsThreshold: 0 });
  const least = loaded.filter((c) => c.id !== home).reduce((
    a,
    b,
  ) => (b.inFlight < a.inFlight ? b : a));
  assert.equal(p.select(loaded, toks([1, 2, 3]))?.id, least.id);
  assert.deepEqual(branches, ["load_balance_walk"]);
});

Deno.test("prefix_hash: a vetoed ring target is skipped; its prefixes come back on recovery", () => {
  const { p } = policy();
  const cands = views(5);
  const req = (k: number) => toks([k, k + 1, k + 2]);
  const homes = Array.from({ length: 300 }, (_, k) => p.select(cands, req(k))!.id);
  const victim = homes[0];
  const rest = cands.filter((c) => c.id !== victim);
  for (let k = 0; k < 300; k++) {
    const pick = p.select(rest, req(k))!.id;
    if (homes[k] !== victim) assert.equal(pick, homes[k]);
    else assert.notEqual(pick, victim);
  }
  assert.deepEqual(Array.from({ length: 300 }, (_, k) => p.select(cands, req(k))!.id), homes);
});

/** Sends `count` same-prefix requests that never complete; returns the ids chosen in order. */
function pile(t: Tuning, count: number): string[] {
  const { p } = policy(t);
  const inFlight = new Map<string, number>();
  const picks: string[] = [];
  for (let i = 0; i < count; i++) {
    const cands = views(4).map((w) => view(w.id, { inFlight: inFlight.get(w.id) ?? 0 }));
    const pick = p.select(cands, toks([42, 43, 44]))!.id;
    inFlight.set(pick, (inFlight.get(pick) ?? 0) + 1);
    picks.push(pick);
  }
  return picks;
}

Deno.test("prefix_hash: same-prefix requests stay together until the load bound trips", () => {
  // 4 workers, abs 10: the home takes load L while L ≤ (L + 1)/4 + 10, i.e. 14 requests; the
  // 15th spills to the least loaded; the next fits again (avg rose).
  const withAbs = pile({ loadFactor: 1.25, balanceAbsThreshold: 10 }, 16);
  const home = withAbs[0];
  assert.deepEqual(withAbs.slice(0, 14), Array(14).fill(home));
  assert.notEqual(withAbs[14], home);
  assert.equal(withAbs[15], home);
  // Factor only: the second request already exceeds 1.25 × (1 + 1)/4.
  const factorOnly = pile({ loadFactor: 1.25, balanceAbsThreshold: 0 }, 2);
  assert.notEqual(factorOnly[1], factorOnly[0]);
});

Deno.test("prefix_hash: under a seeded mixed workload, a request leaves home only when home is over the bound", () => {
  const rnd = seededRandom(7);
  const { p } = policy();
  const { p: probe } = policy();
  const cands = views(8);
  const inFlight = new Map<string, number>(cands.map((c) => [c.id, 0]));
  let stayed = 0;
  const N = 5000;
  for (let i = 0; i < N; i++) {
    // Random completions keep the system near 40 requests in flight.
    for (const [id, n] of inFlight) if (n > 0 && rnd() < 0.12) inFlight.set(id, n - 1);
    const prefix = Math.floor(rnd() ** 2 * 30); // skewed: a few hot prefixes
    const now: WorkerView[] = cands.map((c) => view(c.id, { inFlight: inFlight.get(c.id)! }));
    const req = toks([prefix, 7, 7, 7]);
    const home = probe.select(cands, req)!.id;
    const total = [...inFlight.values()].reduce((a, b) => a + b, 0);
    const pick = p.select(now, req)!.id;
    if (pick === home) stayed++;
    else {assert.ok(
        !loadOk(inFlight.get(home)!, total, 8, { loadFactor: 1.25, balanceAbsThreshold: 10 }),
      );}
    inFlight.set(pick, inFlight.get(pick)! + 1);
  }
  assert.ok(stayed / N > 0.6, `stayed home ${stayed}/${N}`);
});
