/**
 * The default scores (`--wait-model backlog`, `--cache-aware-scoring cost`): scenario tables for
 * least_load, power_of_two and cache_aware, and properties over seeded random fleets: a busier
 * worker (more prefill backlog, more in flight, the same otherwise) never wins on score alone,
 * whatever throughput it reports; affinity wins while the holder's backlog costs less than a cold
 * prefill elsewhere, and gives way once it costs more; the note carries the pick's uncached and
 * cached tokens.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import type { SelectionNote, WorkerView } from "../../lib/core/types.ts";
import { CacheAwarePolicy } from "../../lib/policies/cache_aware/cache_aware.ts";
import { backlogScore } from "../../lib/policies/expected_wait.ts";
import { LeastLoadPolicy } from "../../lib/policies/least_load.ts";
import { NO_OBSERVER } from "../../lib/policies/policy.ts";
import { PowerOfTwoPolicy } from "../../lib/policies/power_of_two.ts";
import { deps, load, request, view } from "../../support/policies.ts";

/** Policy deps with our defaults and recorded branches. */
function ours(seed = 1) {
  const d = deps(seed, undefined, true);
  const branches: string[] = [];
  d.observer = { ...NO_OBSERVER, decision: (_p, b) => branches.push(b) };
  return { d, branches };
}

const note = (prefillTokens = 0): SelectionNote => ({ prefillTokens, predictedCached: null });

/** A worker with `backlog` prompt tokens awaiting a first token and `inFlight` requests. */
const busy = (id: string, backlog: number, inFlight = 0, extra: Partial<WorkerView> = {}) =>
  view(id, { prefillTokens: backlog, inFlight, ...extra });

Deno.test("backlog: least_load scenario table", () => {
  const rows: { name: string; cands: WorkerView[]; want: string }[] = [
    { name: "least backlog", cands: [busy("a", 4000), busy("b", 200), busy("c", 900)], want: "b" },
    {
      name: "equal backlog: fewer in flight",
      cands: [busy("a", 0, 7), busy("b", 0, 2), busy("c", 0, 5)],
      want: "b",
    },
    {
      name: "backlog outweighs in-flight count",
      cands: [busy("a", 1, 0), busy("b", 0, 30)],
      want: "b",
    },
    {
      name: "a report's queue is not read: it is up to an interval old, the backlog is current",
      cands: [
        busy("a", 100, 0, { load: load({ waitingUncachedTokens: 9000 }) }),
        busy("b", 2000, 0, { load: load({ waitingUncachedTokens: 500 }) }),
      ],
      want: "a",
    },
    {
      name: "a high reported throughput buys nothing (SMG's formula would prefer it)",
      cands: [
        busy("a", 3000, 20, { load: load({ genThroughput: 5000 }) }),
        busy("b", 1000, 2, { load: load({ genThroughput: 50 }) }),
      ],
      want: "b",
    },
  ];
  for (const r of rows) {
    const { d, branches } = ours();
    assert.equal(new LeastLoadPolicy(d).select(r.cands, request())?.id, r.want, r.name);
    assert.deepEqual(branches, ["scored"], r.name);
  }
});

Deno.test("backlog: SMG's formula (--wait-model smg) still rewards the worker that reports speed", () => {
  // The feedback the default removes: a busier worker realises a higher generation rate.
  const cands = [
    busy("a", 3000, 20, { load: load({ waitingUncachedTokens: 3000, genThroughput: 5000 }) }),
    busy("b", 1000, 2, { load: load({ waitingUncachedTokens: 1000, genThroughput: 50 }) }),
  ];
  const d = deps(1);
  assert.equal(d.config.leastLoad.waitModel, "smg");
  assert.equal(new LeastLoadPolicy(d).select(cands, request())?.id, "a");
});

/** A random fleet: backlogs, in-flight counts and reports (some stale-free, some absent). */
function fleet(random: () => number, n: number): WorkerView[] {
  return Array.from(
    { length: n },
    (_, i) =>
      busy(`w${i}`, Math.floor(random() * 5) * 700, Math.floor(random() * 6), {
        load: random() < 0.5 ? null : load({
          waitingUncachedTokens: Math.floor(random() * 3) * 500,
          genThroughput: 10 + random() * 5000,
          tokenUsage: random() * 0.99,
        }),
      }),
  );
}

Deno.test("backlog property: a busier worker never wins on score alone (least_load, power_of_two)", () => {
  const random = seededRandom(11);
  for (let trial = 0; trial < 400; trial++) {
    const base = fleet(random, 2 + Math.floor(random() * 6));
    // Give one worker a twin that is the same but busier, with a faster reported rate.
    const src = base[Math.floor(random() * base.length)];
    const seen = src.prefillTokens;
    const twin = busy(
      `${src.id}-busier`,
      seen + 1 + Math.floor(random() * 900),
      src.inFlight + (random() < 0.5 ? 0 : 3),
      {
        load: src.load === null
          ? null
          : { ...src.load, genThroughput: src.load.genThroughput! * 10 },
      },
    );
    const cands = [...base, twin];
    assert.ok(backlogScore(twin) > backlogScore(src), `trial ${trial}`);
    const ll = new LeastLoadPolicy(ours(trial).d).select(cands, request())!;
    assert.notEqual(ll.id, twin.id, `least_load picked the busier twin in trial ${trial}`);
    const scores = cands.map((w) => backlogScore(w));
    assert.equal(backlogScore(ll), Math.min(...scores), `least_load's pick ${trial}`);
    const p2 = new PowerOfTwoPolicy(ours(trial).d);
    for (let k = 0; k < 20; k++) {
      const pick = p2.select([src, twin], request())!;
      assert.equal(pick.id, src.id, `power_of_two picked the busier twin in trial ${trial}`);
    }
  }
});

const SYSTEM = "system: you are the assistant of tenant seven. ".repeat(40); // ~2000 chars

Deno.test("cost scoring: affinity wins while the holder's backlog costs less than twice a cold prefill", () => {
  const prompt = SYSTEM + "user two asks about something";
  const coldTokens = Math.ceil(prompt.length / 4);
  // The holder's uncached share is one user message; a cold worker would prefill ~500 tokens,
  // which count twice (its own prefill and the wait it adds there).
  const table: [backlog: number, want: string, branch: string][] = [
    [0, "h", "hit"],
    [200, "h", "hit"],
    [coldTokens + 50, "h", "hit"],
    [2 * coldTokens - 100, "h", "hit"],
    [2 * coldTokens + 50, "c", "spill"],
    [5000, "c", "spill"],
  ];
  for (const [backlog, want, branch] of table) {
    const { d, branches } = ours();
    const p = new CacheAwarePolicy(d);
    p.apply("m", SYSTEM + "user one asks", view("h").url);
    const n = note(coldTokens);
    const got = p.select([busy("h", backlog), busy("c", 0)], request(prompt), n)!;
    assert.equal(got.id, want, `holder backlog ${backlog}`);
    assert.deepEqual(branches, [branch], `holder backlog ${backlog}`);
    if (want === "h") {
      assert.ok(n.prefillTokens < 20, `the note's uncached tokens: ${n.prefillTokens}`);
      assert.ok(n.predictedCached! > coldTokens * 0.8, `predicted cached ${n.predictedCached}`);
    } else {
      assert.equal(n.prefillTokens, coldTokens);
      assert.equal(n.predictedCached, 0);
      // The spill made the cold worker a holder: the next such request is a hit there.
      branches.length = 0;
      assert.equal(p.select([busy("h", backlog), busy("c", 0)], request(prompt))?.id, "c");
      assert.deepEqual(branches, ["hit"]);
    }
  }
});

Deno.test("cost scoring: the deepest holder wins among holders of equal backlog; no match is a miss", () => {
  const { d, branches } = ours();
  const p = new CacheAwarePolicy(d);
  const turns = "turn one reply one turn two ".repeat(3); // more than a block (64 characters)
  p.apply("m", SYSTEM, view("a").url);
  p.apply("m", SYSTEM + turns, view("b").url);
  const got = p.select(
    [busy("a", 0), busy("b", 0), busy("c", 0)],
    request(SYSTEM + turns + "reply two turn three"),
  );
  assert.equal(got?.id, "b");
  assert.equal(p.select([busy("a", 0), busy("c", 300)], request("unrelated text"))?.id, "a");
  assert.deepEqual(branches, ["hit", "miss"]);
});

Deno.test("cost scoring: a short shared part counts, below --cache-threshold's share", () => {
  // A shared document of ~500 tokens in a ~2,100-token prompt: a quarter, under the 0.3 share
  // SMG's gate wants, still saves the holder a quarter of the prefill.
  const doc = "a shared document of the tenant. ".repeat(60);
  const prompt = doc + "a long question that nobody asked before, ".repeat(150);
  const { d, branches } = ours();
  assert.equal(d.config.cacheAware.cacheThreshold, 0.3);
  const p = new CacheAwarePolicy(d);
  p.apply("m", doc + "an earlier question", view("h").url);
  const n = note(0);
  assert.equal(p.select([busy("c", 0), busy("h", 0)], request(prompt), n)?.id, "h");
  assert.deepEqual(branches, ["hit"]);
  assert.equal(n.predictedCached, Math.floor(doc.length / 64) * 16);
  assert.ok(doc.length / prompt.length < 0.3);
});

Deno.test("cost property: the pick minimises 2 × uncached tokens + backlog; a free full holder always wins", () => {
  const random = seededRandom(3);
  for (let trial = 0; trial < 200; trial++) {
    const { d } = ours(trial);
    const p = new CacheAwarePolicy(d);
    const n = 2 + Math.floor(random() * 5);
    const ids = Array.from({ length: n }, (_, i) => `w${i}`);
    // Each worker was sent the system prompt plus a random share of one conversation.
    const convo = SYSTEM + "conversation ".repeat(60);
    const held = ids.map(() => Math.floor(random() * convo.length));
    ids.forEach((id, i) => held[i] > 0 && p.apply("m", convo.slice(0, held[i]), view(id).url));
    const cands = ids.map((id) => busy(id, Math.floor(random() * 800), Math.floor(random() * 4)));
    const got = p.select(cands, request(convo))!;
    // A match saves its whole blocks (16 tokens, 64 characters), however short.
    const cost = (i: number) =>
      2 * Math.ceil((convo.length - (held[i] - held[i] % 64)) / 4) +
      Math.floor(backlogScore(cands[i]));
    const best = Math.min(...ids.map((_, i) => cost(i)));
    const gi = ids.indexOf(got.id);
    // A tree match may be a little longer than what was inserted (shared prefixes), never shorter.
    assert.ok(cost(gi) <= best + 2, `trial ${trial}: picked cost ${cost(gi)}, best ${best}`);
  }
  const { d } = ours();
  const p = new CacheAwarePolicy(d);
  p.apply("m", SYSTEM + "x", view("full").url);
  const cands = [busy("full", 0, 3), busy("idle1", 0, 0), busy("idle2", 0, 0)];
  for (let k = 0; k < 10; k++) assert.equal(p.select(cands, request(SYSTEM + "x"))?.id, "full");
});

Deno.test("backlog: power_of_two keeps the less busy worker of its last pair as one of the next two", () => {
  // One idle worker among busy ones, wherever it sits and whatever the seed: the rotating probe
  // looks at it within n picks, and memory keeps offering it (no charges here).
  for (let seed = 0; seed < 20; seed++) {
    for (let at = 0; at < 8; at++) {
      const cands = Array.from({ length: 7 }, (_, i) => busy(`b${i}`, 900 + i));
      cands.splice(at, 0, busy("idle", 0));
      const withMemory = new PowerOfTwoPolicy(ours(seed).d);
      const picks = Array.from({ length: 40 }, () => withMemory.select(cands, request())!.id);
      const first = picks.indexOf("idle");
      assert.ok(first >= 0 && first < 8, `seed ${seed}, at ${at}: seen within 8 picks (${first})`);
      assert.ok(picks.slice(first).every((id) => id === "idle"), `seed ${seed}, at ${at}: kept`);
    }
  }
  const cands = [busy("idle", 0), ...Array.from({ length: 7 }, (_, i) => busy(`b${i}`, 900 + i))];
  // SMG's sampling (--wait-model smg) draws both at random and, without load reports, ties on
  // in-flight counts: the idle worker about 1/8 of the time (drawn 2/8, then a coin).
  const uniform = new PowerOfTwoPolicy(deps(4));
  const n = Array.from({ length: 800 }, () => uniform.select(cands, request())!.id)
    .filter((id) => id === "idle").length;
  assert.ok(n > 60 && n < 140, `about 1/8 of picks: ${n}`);
  // When the winner's new request makes it busier than the loser, the loser is remembered.
  const p = new PowerOfTwoPolicy(ours(5).d);
  const pair = [busy("x", 0), busy("y", 30)];
  assert.equal(p.select(pair, request("z".repeat(400)))?.id, "x");
  assert.equal(p.select([busy("x", 100), busy("y", 30), busy("q", 5000)], request())?.id, "y");
});
