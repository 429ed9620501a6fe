/**
 * cache_aware's selection as scenario tables: hits go to the least busy holder, the gate spills
 * a far-busier holder (and the spill target becomes a holder), misses and pressure go by expected
 * wait, token requests use the token tree, the hash index, removal purges, eviction holds the
 * budget, and decisions can be exported to and applied on another instance (the mesh's hooks).
 */

import assert from "node:assert/strict";
import { defaultConfig, type GatewayConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { SelectionNote, WorkerView } from "../../../lib/core/types.ts";
import { CacheAwarePolicy } from "../../../lib/policies/cache_aware/cache_aware.ts";
import { placementFresh } from "../../../lib/policies/cache_aware/matches.ts";
import type { PolicyObserver } from "../../../lib/policies/policy.ts";
import { load, request, view } from "../../../support/policies.ts";

interface Seen {
  branches: string[];
  ratios: number[];
  trees: [string, string, number, number][];
}

/** SMG's gate and formula unless `tune` picks ours (most tests here check SMG's behaviour). */
function policy(tune: (c: GatewayConfig) => void = () => {}, clock = { t: 0 }) {
  const config = defaultConfig();
  config.leastLoad.waitModel = "smg";
  config.cacheAware.scoring = "smg";
  tune(config);
  const seen: Seen = { branches: [], ratios: [], trees: [] };
  const observer: PolicyObserver = {
    decision: (_p, b) => seen.branches.push(b),
    stickyEntries: () => {},
    keySource: () => {},
    matchRatio: (_p, r) => seen.ratios.push(r),
    treeSize: (m, t, s, n) => seen.trees.push([m, t, s, n]),
  };
  const p = new CacheAwarePolicy({
    random: seededRandom(7),
    now: () => clock.t,
    log: silentLogger,
    config,
    observer,
  });
  return { p, seen, clock };
}

const w = (id: string, inFlight = 0, extra: Partial<WorkerView> = {}) =>
  view(id, { inFlight, ...extra });

Deno.test("cache_aware: the worked example — a repeat and its prefix return to the first worker", () => {
  const { p, seen } = policy((c) => (c.cacheAware.cacheThreshold = 0.5));
  const ws = [w("w1", 0), w("w2", 1)];
  assert.equal(p.select(ws, request("hello world"))?.id, "w1"); // miss: least busy
  ws[0] = w("w1", 3); // now busier than w2, but it holds the prefix
  assert.equal(p.select(ws, request("hello world"))?.id, "w1");
  assert.equal(p.select(ws, request("hello"))?.id, "w1"); // 5/5 inside the edge
  assert.deepEqual(seen.branches, ["miss", "hit", "hit"]);
  assert.deepEqual(seen.ratios, [0, 1, 1]);
});

Deno.test("cache_aware: a hit goes to the least busy holder, not to an idle non-holder", () => {
  const { p } = policy();
  const prompt = "system: you are a helpful assistant. ".repeat(20);
  // Two earlier conversations on the same system prompt went to w1 and w2 (say, a spill).
  p.apply("m", prompt + "a", view("w1").url);
  p.apply("m", prompt + "b", view("w2").url);
  // Both hold the system prompt; w3 is idle but holds nothing.
  assert.equal(p.select([w("w1", 5), w("w2", 2), w("w3", 0)], request(prompt + "c"))?.id, "w2");
});

Deno.test("cache_aware: the gate needs both margins; a spill makes the target a holder", () => {
  const text = "a long shared prefix ".repeat(10);
  const cases: [number, number, string][] = [
    // [abs threshold, holder in-flight, expected pick] with two idle others
    [64, 10, "hot"], // 10 > 3.3×1.5 but not > 3.3+64: keep affinity
    [2, 10, "cold1"], // both margins exceeded: spill to the least busy
    [64, 100, "cold1"], // 100 > 33×1.5 and > 33+64: spill
  ];
  for (const [abs, load, expected] of cases) {
    const { p, seen } = policy((c) => (c.cacheAware.balanceAbsThreshold = abs));
    p.select([w("hot"), w("cold1", 1), w("cold2", 2)], request(text + "x"));
    const picked = p.select([w("hot", load), w("cold1"), w("cold2", 1)], request(text + "y"));
    assert.equal(picked?.id, expected, `abs ${abs}, load ${load}`);
    if (expected !== "hot") {
      assert.equal(seen.branches.at(-1), "spill");
      // The spill target now holds the prefix: with the hot worker gone it is a hit there.
      assert.equal(p.select([w("cold1", 3), w("cold2")], request(text + "z"))?.id, "cold1");
      assert.equal(seen.branches.at(-1), "hit");
    }
  }
});

Deno.test("cache_aware: a miss goes to the lowest expected wait, using load reports when fresh", () => {
  const { p, seen, clock } = policy();
  clock.t = 1000;
  const busy = w("busy", 0, {
    load: load({ waitingUncachedTokens: 8000, genThroughput: 100 }),
    loadAt: 1000,
  });
  const idle = w("idle", 3, {
    load: load({ waitingUncachedTokens: 100, genThroughput: 100 }),
    loadAt: 1000,
  });
  assert.equal(p.select([busy, idle], request("something new"))?.id, "idle");
  assert.deepEqual(seen.branches, ["miss"]);
  // Without reports (or with stale ones) in-flight counts decide.
  clock.t = 1000 + 10 * 60_000;
  assert.equal(p.select([busy, idle], request("quite unrelated words"))?.id, "busy");
});

Deno.test("cache_aware: KV pressure sends every request by expected wait", () => {
  const { p, seen } = policy((c) => (c.cacheAware.overloadTokenUsageThreshold = 0.9));
  const text = "a cached prompt ".repeat(10);
  const full = w("full", 0, { load: load({ tokenUsage: 0.95 }) });
  const free = w("free", 1, { load: load({ tokenUsage: 0.2, waitingRequests: 0 }) });
  p.select([full, w("free", 9, { load: load({ tokenUsage: 0.2 }) })], request(text + "1"));
  assert.equal(p.select([full, free], request(text + "2"))?.id, "free");
  assert.deepEqual(seen.branches, ["pressure", "pressure"]);
  assert.equal(p.needs.backendLoads, true);
  assert.equal(policy().p.needs.backendLoads, false);
});

Deno.test("cache_aware: token requests match whole pages of the token tree", () => {
  const { p, seen } = policy((c) => (c.cacheAware.blockSize = 16));
  const head = Array.from({ length: 32 }, (_, i) => i);
  p.select([w("a"), w("b", 1)], request("", { tokens: [...head, 99, 98] }));
  assert.equal(
    p.select([w("a", 2), w("b")], request("", { tokens: [...head, 7, 7, 7, 7, 7, 7, 7, 7] }))?.id,
    "a",
  );
  assert.equal(seen.ratios[1], 32 / 40);
});

Deno.test("cache_aware: hash index sticks a repeated head to its holder, deepest boundary first", () => {
  const { p, seen } = policy((c) => {
    c.cacheAware.cacheIndex = "hash";
    c.cacheBoundaries = [16, 32];
    c.cacheAware.balanceAbsThreshold = 0;
    c.cacheAware.balanceRelThreshold = 1;
  });
  const t = (n: number, tail: number) => ({
    tokens: [...Array.from({ length: n }, (_, i) => i), tail],
  });
  p.select([w("x"), w("y", 1)], request("", t(16, 1))); // miss: x holds the 16-token head
  // x holds the 16-token head but is far busier: spill to y, which now holds 16 and 32.
  assert.equal(p.select([w("x", 5), w("y")], request("", t(40, 2)))?.id, "y");
  // Both idle; x holds 16, but y holds the deeper 32-token head.
  assert.equal(
    p.select([w("x"), w("y")], request("", t(40, 3)))?.id,
    "y",
    "deepest boundary wins",
  );
  assert.deepEqual(seen.branches, ["miss", "spill", "hit"]);
});

Deno.test("cache_aware: a removed worker is purged; its prefixes go by expected wait again", () => {
  const { p } = policy();
  const text = "conversation history ".repeat(10);
  p.select([w("gone"), w("stay", 1)], request(text));
  p.onWorkerRemoved("gone");
  // A new worker with the same id must not inherit anything either.
  assert.equal(p.select([w("gone", 1), w("stay")], request(text))?.id, "stay");
});

Deno.test("cache_aware: eviction runs every interval and holds the tree budget", () => {
  const clock = { t: 0 };
  const { p, seen } = policy((c) => {
    c.cacheAware.maxTreeSize = 200;
    c.evictionIntervalSecs = 10;
  }, clock);
  for (let i = 0; i < 20; i++) p.select([w("a"), w("b")], request(`prompt number ${i} `.repeat(4)));
  assert.equal(seen.trees.length, 0, "not yet due");
  clock.t = 10_000;
  p.select([w("a"), w("b")], request("trigger"));
  const string = seen.trees.find(([, tree]) => tree === "string")!;
  assert.ok(string[2] <= 200, `string tree within budget: ${string[2]}`);
});

Deno.test("cache_aware: decisions exported from one gateway route the same on another", () => {
  const a = policy().p;
  const b = policy().p;
  const text = "tenant seven system prompt ".repeat(8);
  a.select([w("u1"), w("u2", 1)], request(text + "q1"));
  for (const e of a.export("m")) b.apply("m", e.key, e.tenant);
  assert.equal(b.select([w("u1", 4), w("u2")], request(text + "q2"))?.id, "u1");
});

Deno.test("cache_aware: misses between two load reports spread by the work already sent", () => {
  const { p, clock } = policy();
  clock.t = 500;
  // a reports an empty queue, b 10 queued tokens: a is the argmin until work sent to it counts.
  const a = w("a", 0, {
    load: load({ genThroughput: 100, waitingUncachedTokens: 0 }),
    loadAt: 500,
  });
  const b = w("b", 0, {
    load: load({ genThroughput: 100, waitingUncachedTokens: 10 }),
    loadAt: 500,
  });
  const prompt = (c: string) => c.repeat(400); // ~100 tokens of new work each, no shared prefix
  assert.equal(p.select([a, b], request(prompt("x")))?.id, "a");
  assert.equal(
    p.select([a, b], request(prompt("y")))?.id,
    "b",
    "a's credited work now outweighs b's queue",
  );
  // A newer report from a resets its credit.
  const fresh = w("a", 0, {
    load: load({ genThroughput: 100, waitingUncachedTokens: 0 }),
    loadAt: 600,
  });
  assert.equal(p.select([fresh, b], request(prompt("z")))?.id, "a");
});

Deno.test("cache_aware: an answer reporting less cached makes the tree forget the worker's stale branches", () => {
  const config = defaultConfig();
  const corrections: [string, string, number][] = [];
  const p = new CacheAwarePolicy({
    random: seededRandom(7),
    now: () => 0,
    log: silentLogger,
    config,
    observer: {
      decision: () => {},
      stickyEntries: () => {},
      keySource: () => {},
      treeCorrection: (model, tree, units) => corrections.push([model, tree, units]),
    },
  });
  const ws = [w("w1"), w("w2")];
  const S = "shared system prompt ".repeat(20);
  const a = S + "conversation a ".repeat(20);
  const [x, y, z] = ["x ", "y ", "z "].map((t) => t.repeat(40));
  // Whole blocks of 16 tokens: 64 characters.
  const blocks = (chars: number) => Math.floor(chars / 64) * 16;
  const pick = (text: string) => {
    const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
    return { chosen: p.select(ws, request(text), note)!, note };
  };
  const holder = pick(a + x).chosen.id;
  assert.equal(pick(a + y).chosen.id, holder, "a hit on the shared conversation");
  const c = pick(a + z);
  assert.equal(c.chosen.id, holder);
  assert.ok(c.note.onReport, "a prediction comes with a way to correct it");
  // What the tree believes of the x branch before any report: all of it.
  assert.equal(pick(a + x).note.predictedCached, blocks((a + x).length));
  // The answer to c: the worker had only S (its conversation had been evicted).
  c.note.onReport!({ prompt: 1000, cached: Math.floor((S.length / (a + z).length) * 1000) });
  assert.deepEqual(corrections, [["m", "string", y.length]], "the y branch, stale, is forgotten");
  // x was refreshed by the check above (after c): kept. The conversation itself was re-sent
  // with c, so the worker holds it again.
  assert.equal(pick(a + x).note.predictedCached, blocks((a + x).length));
  assert.equal(
    pick(a + y).note.predictedCached,
    blocks(a.length),
    "y: only what c re-sent",
  );
  // A report close to the prediction changes nothing.
  const d = pick(a + z);
  d.note.onReport!({ prompt: 1000, cached: 990 });
  assert.equal(corrections.length, 1);
});

Deno.test("cache_aware: where workers publish KV events, their account routes token requests; an empty index leaves it to the tree", () => {
  const config = defaultConfig();
  const held = new Map<string, number>();
  let empty = true;
  let now = 0;
  const p = new CacheAwarePolicy({
    random: seededRandom(7),
    now: () => now,
    log: silentLogger,
    config,
    cacheIndex: (model) => model === "m" ? { empty, match: () => held, reports: () => true } : null,
  });
  const ws = [w("w1"), w("w2"), w("w3")];
  const tokens = Array.from({ length: 64 }, (_, i) => i);
  const pick = () => {
    const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
    const chosen = p.select(ws, request("ignored", { tokens }), note)!;
    return { id: chosen.id, note };
  };
  const first = pick(); // empty index: the tree (cold) decides, and records the pick
  assert.equal(first.note.predictedCached, 0);
  // The engines say w3 holds 48 of the 64 tokens (the tree believes the first pick holds all,
  // sent long enough ago that its events would say so).
  now += 60_000;
  empty = false;
  held.set("http://w3:8000", 48);
  const second = pick();
  assert.equal(second.id, "w3");
  assert.equal(second.note.predictedCached, 48);
  assert.equal(second.note.onReport, undefined, "no tree correction when the index decided");
  // A repeat at once: w3 was just sent all of it, which its events cannot say yet.
  const again = pick();
  assert.equal(again.id, "w3");
  assert.equal(again.note.predictedCached, 64, "what is in flight counts");
  now += 60_000;
  held.clear(); // the index holds blocks, none of this prompt's: nobody is credited
  const third = pick();
  assert.equal(third.note.predictedCached, 0);
});

Deno.test("cache_aware: a worker whose events stopped is judged by the tree, the others by their account", () => {
  const config = defaultConfig();
  const held = new Map<string, number>();
  const down = new Set<string>();
  let now = 0;
  const p = new CacheAwarePolicy({
    random: seededRandom(7),
    now: () => now,
    log: silentLogger,
    config,
    cacheIndex: () => ({ empty: false, match: () => held, reports: (u) => !down.has(u) }),
  });
  const ws = [w("w1"), w("w2"), w("w3")];
  const tokens = Array.from({ length: 64 }, (_, i) => i);
  const pick = () => {
    const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
    const chosen = p.select(ws, request("ignored", { tokens }), note)!;
    return { id: chosen.id, note };
  };
  p.apply("m", tokens, "http://w1:8000"); // the tree: w1 was sent the prompt
  held.set("http://w2:8000", 32); // the engines: w2 holds half, w1 nothing (evicted)
  now += 60_000;
  assert.equal(pick().id, "w2", "every stream up: the engines' account");
  now += 60_000;
  down.add("http://w1:8000"); // w1's events stop: its part comes from the tree
  const r = pick();
  assert.equal(r.id, "w1");
  assert.equal(r.note.predictedCached, 64);
  assert.ok(r.note.onReport, "the tree's belief, corrected by the answer");
  down.add("http://w2:8000");
  down.add("http://w3:8000"); // nobody reports: the tree alone, where w1 and w2 hold it all
  const t = pick();
  assert.notEqual(t.id, "w3");
  assert.equal(t.note.predictedCached, 64);
});

Deno.test("cache_aware: a worker's part of the tree stays within the KV capacity it states, least recent out first", () => {
  for (const feedback of ["on", "off"] as const) {
    const config = defaultConfig();
    config.cacheAware.treeFeedback = feedback;
    const p = new CacheAwarePolicy({
      random: seededRandom(7),
      now: () => 0,
      log: silentLogger,
      config,
    });
    const one = [w("w1", 0, { kvCapacity: 256 })]; // tokens
    const prompt = (i: number) => Array.from({ length: 96 }, (_, k) => i * 1000 + k);
    const pick = (i: number) => {
      const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
      p.select(one, request("ignored", { tokens: prompt(i) }), note);
      return note.predictedCached;
    };
    for (let i = 0; i < 4; i++) assert.equal(pick(i), 0, "each prompt new");
    // 4 × 96 = 384 tokens sent to a 256-token cache: the oldest went, as the engine's LRU does.
    assert.equal(pick(3), 96, "the newest is held");
    assert.equal(pick(0), feedback === "on" ? 0 : 96, `the oldest, feedback ${feedback}`);
  }
});

Deno.test("cache_aware: with tokens of 8 characters the capacity bound never drops a branch the engine still holds", () => {
  // A worker whose engine holds 10,000 tokens is sent 12 distinct prompts of 6,000 characters:
  // 750 tokens each at 8 characters a token, 9,000 in all, so the engine still holds every one.
  // Counted at 4 characters a token (the old constant) they would be 18,000 tokens and the tree
  // would forget the oldest while the engine has them; at the learned 8 it keeps them all.
  for (const cpt of [8, 4]) {
    let t = 0;
    const p = new CacheAwarePolicy({
      random: seededRandom(7),
      now: () => t,
      log: silentLogger,
      config: defaultConfig(),
    });
    const one = [w("w1", 0, { kvCapacity: 10_000, charsPerToken: cpt })];
    const prompt = (i: number) => `${i} `.repeat(3000).slice(0, 6000);
    const pick = (i: number) => {
      t += 100;
      const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
      p.select(one, request(prompt(i), { charsPerToken: cpt }), note);
      return note.predictedCached;
    };
    for (let i = 0; i < 12; i++) assert.equal(pick(i), 0, "each prompt new");
    const first = pick(0);
    // Whole 16-token blocks of it: 46 × 128 characters = 736 tokens.
    if (cpt === 8) assert.equal(first, 736, "the oldest is still held, every whole block of it");
    else assert.equal(first, 0, "at 4 characters a token the bound forgets it (the control)");
  }
});

Deno.test("cache_aware: --tree-feedback off leaves the tree uncorrected", () => {
  const config = defaultConfig();
  config.cacheAware.treeFeedback = "off";
  const p = new CacheAwarePolicy({
    random: seededRandom(7),
    now: () => 0,
    log: silentLogger,
    config,
  });
  const ws = [w("w1"), w("w2")];
  const text = "shared prefix of a conversation ".repeat(20);
  p.select(ws, request(text));
  const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
  p.select(ws, request(text + " and more"), note);
  assert.ok(note.predictedCached! > 0, "a hit, predicted");
  assert.equal(note.onReport, undefined);
});

Deno.test("cache_aware: new conversations off a held system prompt spread once the holder has drawn 20× it in recent work; a conversation stays", () => {
  // 4 workers, a 4,000-character system prompt (1,000 tokens) w1 holds; each new conversation
  // adds 8,000 characters (2,000 tokens) of its own. Without the recent-work term every one lands
  // on w1 (its backlog drains between arrivals); with it they spread once w1's recent work
  // exceeds the others' by 20 × 1,000 tokens, about ten conversations in.
  const system = "s".repeat(4000);
  const run = (weight: number) => {
    const clock = { t: 0 };
    const { p } = policy((c) => {
      c.cacheAware.scoring = "cost";
      c.leastLoad.waitModel = "backlog";
      c.cacheAware.workWeight = weight;
    }, clock);
    const ws = ["w1", "w2", "w3", "w4"].map((id) => w(id));
    p.apply("m", system, ws[0].url);
    const picks: string[] = [];
    for (let i = 0; i < 40; i++) {
      clock.t += 500; // one new conversation every half second, each served before the next
      const convo = system + `${i}`.padEnd(8000, "u");
      picks.push(p.select(ws, request(convo))!.id);
    }
    // A conversation already on w2 with a long history comes back: it stays there.
    const history = system + "h".repeat(60_000);
    p.apply("m", history, ws[1].url);
    const back = p.select(ws, request(history + " next turn"))!.id;
    return { picks, back };
  };
  const off = run(0);
  assert.deepEqual(new Set(off.picks), new Set(["w1"]), "without the term: all on the holder");
  const on = run(0.1);
  const counts = new Map<string, number>();
  for (const x of on.picks) counts.set(x, (counts.get(x) ?? 0) + 1);
  // The prompt replicates to as many workers as the work needs (each new holder then costs only
  // the branch), not necessarily to all.
  assert.ok(counts.size >= 3, `spread over the fleet: ${JSON.stringify([...counts])}`);
  assert.ok(counts.get("w1")! <= 20, `the holder keeps a share, not all: ${counts.get("w1")}`);
  assert.equal(on.back, "w2", "a long conversation stays where its history is");
});

Deno.test("cache_aware: a decision on tokens the gateway made from the text is recorded in the text tree too", () => {
  const { p } = policy((c) => {
    c.cacheAware.scoring = "cost";
    c.leastLoad.waitModel = "backlog";
  });
  const ws = [w("w1"), w("w2"), w("w3")];
  const text = "a long shared document ".repeat(200);
  const tokens = Array.from({ length: 1200 }, (_, i) => i + 7);
  const first = p.select(ws, request(text, { tokens, tokenizedText: true }))!;
  // The next request of that prefix comes too long to tokenize: routed on its text alone.
  const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
  assert.equal(p.select(ws, request(text + " and a question", {}), note)!.id, first.id);
  assert.ok(note.predictedCached! > 1000, "its text was held where its tokens went");
});

Deno.test("cache_aware: a peer's placement is trusted until its worker's cache has turned over since", () => {
  const fresh = (recent: number | null, capacity: number | null, age: number) =>
    placementFresh(
      {
        ...view("u1"),
        kvCapacity: capacity,
        ...(recent === null ? {} : { recentWork: () => recent }),
      },
      1000,
      1000 + age,
    );
  // 300k tokens of recent work: 10k tokens/s enter a 100k-token cache; 0.7 of it takes 7 s.
  assert.equal(fresh(300_000, 100_000, 6_900), true);
  assert.equal(fresh(300_000, 100_000, 7_100), false);
  // Twice the work: half the time.
  assert.equal(fresh(600_000, 100_000, 3_600), false);
  // No capacity stated, or no work seen: nothing to go by, trusted.
  assert.equal(fresh(300_000, null, 1e9), true);
  assert.equal(fresh(null, 100_000, 1e9), true);
  assert.equal(fresh(0, 100_000, 1e9), true);
});
