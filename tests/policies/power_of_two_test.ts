/**
 * power_of_two: pair scenarios with two candidates (the pair is the whole list, so picks are
 * deterministic), sampling statistics with more, the credit, staleness, the default-tuning rule,
 * and a seeded balls-into-bins property against random. Covers SMG's power_of_two tests.
 */

import assert from "node:assert/strict";
import type { LoadSnapshot, WorkerView } from "../../lib/core/types.ts";
import { NO_OBSERVER } from "../../lib/policies/policy.ts";
import { PowerOfTwoPolicy } from "../../lib/policies/power_of_two.ts";
import { RandomPolicy } from "../../lib/policies/random.ts";
import { deps, load, request, tally, view } from "../../support/policies.ts";

function rep(id: string, over: Partial<LoadSnapshot>, extra: Partial<WorkerView> = {}) {
  return view(id, { load: load(over), loadAt: 0, ...extra });
}

/** A policy at clock `now`, with decisions recorded. */
function policy(seed = 1, now = 0) {
  const d = deps(seed);
  const branches: string[] = [];
  d.now = () => now;
  d.observer = { ...NO_OBSERVER, decision: (_p, b) => branches.push(b) };
  return { p: new PowerOfTwoPolicy(d), branches, config: d.config };
}

const pick = (p: PowerOfTwoPolicy, cands: WorkerView[]) => p.select(cands, request())?.id;

const PAIRS: { name: string; now?: number; cands: WorkerView[]; want: string; branch: string }[] = [
  {
    name: "queue length steers the pair (8000 vs 1000 tokens)",
    cands: [rep("a", { waitingUncachedTokens: 8000 }), rep("b", { waitingUncachedTokens: 1000 })],
    want: "b",
    branch: "pair",
  },
  {
    name: "requests-only report is not idle: 10 waiting (5.1 s) vs a 1 s token queue",
    cands: [rep("a", { waitingRequests: 10 }), rep("b", { waitingUncachedTokens: 2000 })],
    want: "b",
    branch: "pair",
  },
  {
    name: "KV pressure steers when queues are empty (0.8 vs 0.1)",
    cands: [rep("a", { tokenUsage: 0.8 }), rep("b", { tokenUsage: 0.1 })],
    want: "b",
    branch: "pair",
  },
  {
    name: "dark worker by drain time: 5 in-flight (2.56 s) loses to a KV barrier (1.35 s)",
    cands: [view("a", { inFlight: 5 }), rep("b", { tokenUsage: 0.9 })],
    want: "b",
    branch: "pair",
  },
  {
    name: "dark worker by drain time: 2 in-flight (1.02 s) beats the KV barrier (1.35 s)",
    cands: [view("a", { inFlight: 2 }), rep("b", { tokenUsage: 0.9 })],
    want: "a",
    branch: "pair",
  },
  {
    name: "dark pair joins the shortest queue",
    cands: [view("a", { inFlight: 3 }), view("b", { inFlight: 1 })],
    want: "b",
    branch: "dark_pair",
  },
  {
    name: "a stale report is absent: idle-looking a is scored by its 10 in-flight",
    now: 40_000,
    cands: [
      rep("a", {}, { inFlight: 10 }),
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 1000 }, { loadAt: 39_000 }),
    ],
    want: "b",
    branch: "pair",
  },
  {
    name: "the same report while fresh wins",
    now: 20_000,
    cands: [
      rep("a", {}, { inFlight: 10 }),
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 1000 }, { loadAt: 19_000 }),
    ],
    want: "a",
    branch: "pair",
  },
  {
    name: "the only candidate is returned without sampling",
    cands: [view("a", { inFlight: 99 })],
    want: "a",
    branch: "single",
  },
];

for (const row of PAIRS) {
  Deno.test(`power_of_two: ${row.name}`, () => {
    for (const seed of [1, 2, 3]) {
      const { p, branches } = policy(seed, row.now);
      for (const order of [row.cands, [...row.cands].reverse()]) {
        assert.equal(pick(p, order), row.want, `seed ${seed}`);
      }
      assert.deepEqual(branches, [row.branch, row.branch]);
    }
  });
}

Deno.test("power_of_two: declares it needs load reports, not text", () => {
  assert.deepEqual(policy().p.needs, { requestText: false, backendLoads: true });
});

Deno.test("power_of_two: scores with least_load's defaults, whatever the --least-load-* flags", () => {
  const { p, config } = policy();
  config.leastLoad = {
    kvPressureWeight: 100,
    defaultThroughput: 1,
    meanPrefillTokens: 1,
    maxWaitingRequests: 1,
    waitModel: "smg",
  };
  const q = new PowerOfTwoPolicy({ ...deps(1), config });
  for (const pol of [p, q]) {
    // Defaults: a's KV term 0.15 s beats b's 0.6 s queue; at λ = 100 a would be 100 s.
    assert.equal(
      pick(pol, [rep("a", { tokenUsage: 0.5 }), rep("b", { waitingUncachedTokens: 1200 })]),
      "a",
    );
    // No queue cap: both at 5 waiting still route.
    assert.ok(pick(pol, [rep("c", { waitingRequests: 5 }), rep("d", { waitingRequests: 5 })]));
  }
});

Deno.test("power_of_two: credit water-fills identical workers", () => {
  const cands = [rep("a", {}), rep("b", {})];
  for (const seed of [1, 2, 3]) {
    const { p } = policy(seed);
    const t = tally(Array.from({ length: 100 }, () => p.select(cands, request())));
    assert.deepEqual([t.get("a"), t.get("b")], [50, 50], `seed ${seed}`);
  }
});

Deno.test("power_of_two: credit tips the next pick; a newer report clears it", () => {
  const a = (loadAt: number) => rep("a", { waitingUncachedTokens: 1000 }, { loadAt }); // 0.5 s
  const b = rep("b", { waitingUncachedTokens: 1200 }, { loadAt: 1000 }); // 0.6 s
  const kept = policy(1, 5000).p;
  assert.equal(pick(kept, [a(1000), b]), "a");
  assert.equal(pick(kept, [a(1000), b]), "b", "a's 1024 credited tokens tip it");
  const reset = policy(1, 5000).p;
  assert.equal(pick(reset, [a(1000), b]), "a");
  assert.equal(pick(reset, [a(4000), b]), "a", "a newer report restores a");
});

Deno.test("power_of_two: removing a worker forgets its credit", () => {
  const a = rep("a", { waitingUncachedTokens: 1000 });
  const b = rep("b", { waitingUncachedTokens: 1500 });
  const { p } = policy();
  assert.equal(pick(p, [a, b]), "a");
  p.onWorkerRemoved("a");
  assert.equal(pick(p, [a, b]), "a", "without the removal b would win");
});

Deno.test("power_of_two: the pair is two distinct, uniformly drawn workers", () => {
  // Dark workers with in-flight 0..3: the rank-r worker wins when paired with a worse one,
  // (3 − r) of the 6 pairs. 6,000 picks: expected 3000/2000/1000/0 (sd ≤ 39); allow ±150.
  // The worst never winning also shows a worker is never paired with itself.
  const cands = [0, 1, 2, 3].map((n) => view(`r${n}`, { inFlight: n }));
  const { p } = policy(9);
  const t = tally(Array.from({ length: 6000 }, () => p.select(cands, request())));
  assert.equal(t.get("r3"), undefined);
  for (const [id, want] of [["r0", 3000], ["r1", 2000], ["r2", 1000]] as const) {
    assert.ok(Math.abs((t.get(id) ?? 0) - want) <= 150, `${id}: ${t.get(id)}`);
  }
});

Deno.test("power_of_two: cold start favours low in-flight; the busiest never wins", () => {
  // In-flight 10/5/0: 0 wins two of three pairs, 5 one, 10 none. 3,000 picks, ±150.
  const cands = [view("ten", { inFlight: 10 }), view("five", { inFlight: 5 }), view("zero")];
  const { p } = policy(4);
  const t = tally(Array.from({ length: 3000 }, () => p.select(cands, request())));
  assert.equal(t.get("ten"), undefined);
  assert.ok(Math.abs(t.get("zero")! - 2000) <= 150, `zero: ${t.get("zero")}`);
});

Deno.test("power_of_two: exact ties go to either worker with equal chance", () => {
  // Dark pair with equal in-flight (credit does not move dark scores): 10,000 picks, sd 50.
  const cands = [view("a", { inFlight: 2 }), view("b", { inFlight: 2 })];
  const { p } = policy(5);
  const t = tally(Array.from({ length: 10_000 }, () => p.select(cands, request())));
  assert.ok(Math.abs(t.get("a")! - 5000) <= 200, `a: ${t.get("a")}`);
});

Deno.test("power_of_two: nominal throughput is taken over the pair only", () => {
  // a dark with 5 in-flight; b a 40 s queue at 100 tok/s; c hopeless but reports 1e6 tok/s.
  // Pair-scoped: a loses to b (51 s vs 40 s), beats c: a wins only the {a, c} pair, a third.
  // Had c's throughput leaked into {a, b}, a would win two thirds. Fresh policies: no credit.
  const cands = [
    view("a", { inFlight: 5 }),
    rep("b", { waitingUncachedTokens: 4000, genThroughput: 100 }),
    rep("c", { waitingUncachedTokens: 1e12, genThroughput: 1e6 }),
  ];
  const t = tally(Array.from({ length: 3000 }, (_, s) => policy(s).p.select(cands, request())));
  assert.ok(Math.abs(t.get("a")! - 1000) <= 120, `a: ${t.get("a")}`);
  assert.ok(Math.abs(t.get("b")! - 2000) <= 120, `b: ${t.get("b")}`);
});

Deno.test("power_of_two: balls into bins: max load near log log n / log 2, far below random", () => {
  // m = 10,000 requests onto n = 100 dark workers whose in-flight grows as they are chosen (no
  // completions), so each pair is join-shortest-queue. Theory (Berenbrink et al., heavily
  // loaded case): two choices leave a gap max − m/n = ln ln n / ln 2 + O(1) ≈ 2.2 + O(1); one
  // random choice leaves Θ(√(m ln n / n)) ≈ 30. Tolerance: power_of_two's gap ≤ bound + 2
  // (so ≤ 4 above the mean of 100), random's gap ≥ 10 and ≥ 3× power_of_two's, on every seed.
  const n = 100;
  const m = 10_000;
  const bound = Math.log(Math.log(n)) / Math.log(2);
  const maxLoad = (
    make: (seed: number) => { select: PowerOfTwoPolicy["select"] },
    seed: number,
  ) => {
    const bins = Array.from({ length: n }, (_, i) => ({ ...view(`bin${i}`), inFlight: 0 }));
    const p = make(seed);
    const r = request();
    for (let k = 0; k < m; k++) p.select(bins, r)!.inFlight++;
    return Math.max(...bins.map((b) => b.inFlight));
  };
  for (const seed of [1, 2, 3, 4, 5]) {
    const two = maxLoad((s) => new PowerOfTwoPolicy(deps(s)), seed) - m / n;
    const one = maxLoad((s) => new RandomPolicy(deps(s)), seed) - m / n;
    assert.ok(two <= bound + 2, `seed ${seed}: power_of_two gap ${two} > ${bound.toFixed(2)} + 2`);
    assert.ok(one >= 10 && one >= 3 * two, `seed ${seed}: random gap ${one} vs ${two}`);
  }
});
