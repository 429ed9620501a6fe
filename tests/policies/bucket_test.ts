/**
 * bucket: the boundary-adaptation examples of SMG's own bucket tests, the imbalance override,
 * removal, an unavailable owner, idle-window expiry, the random pick outside the prefill leg,
 * determinism under churn, and a mixed short/long workload on which bucket spreads prefill
 * tokens more evenly than round_robin.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import type { WorkerView } from "../../lib/core/types.ts";
import { BUCKET_ADJUST_INTERVAL_MS, BucketPolicy } from "../../lib/policies/bucket.ts";
import { NO_OBSERVER } from "../../lib/policies/policy.ts";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { deps, request, view } from "../../support/policies.ts";

const MAX = Infinity;
const T = BUCKET_ADJUST_INTERVAL_MS;

/** Prefill candidates p0..p(n-1). */
function prefills(n: number): WorkerView[] {
  return Array.from({ length: n }, (_, i) => view(`p${i}`, { type: "prefill" }));
}

/** A bucket policy on a fake clock (`at(ms)` sets it), with its decisions recorded. */
function setup(over: { abs?: number; rel?: number; seed?: number } = {}) {
  const d = deps(over.seed ?? 1);
  let now = 0;
  d.now = () => now;
  if (over.abs !== undefined) d.config.cacheAware.balanceAbsThreshold = over.abs;
  if (over.rel !== undefined) d.config.cacheAware.balanceRelThreshold = over.rel;
  const branches: string[] = [];
  d.observer = { ...NO_OBSERVER, decision: (_p, b) => branches.push(b) };
  const p = new BucketPolicy(d);
  return {
    p,
    branches,
    at: (ms: number) => (now = ms),
    /** Routes a request of `size` characters among `cands`; returns the picked id. */
    send: (cands: readonly WorkerView[], size: number) =>
      p.select(cands, request("x".repeat(size)))?.id,
    /** The model's ranges as [lo, hi] pairs. */
    bounds: () => p.ranges("m").map((r) => [r.lo, r.hi]),
  };
}

Deno.test("bucket: the initial ranges split [0, 4096) evenly, the last open-ended", () => {
  const s = setup();
  s.send(prefills(3), 1);
  assert.deepEqual(s.bounds(), [[0, 1364], [1365, 2729], [2730, MAX]]);
  assert.deepEqual(s.p.ranges("m").map((r) => r.worker), ["p0", "p1", "p2"]);
  assert.deepEqual(s.p.ranges("other"), []);
});

/** Sends `sizes` at `start`, then a size-0 request at `start + T` that runs the adaptation. */
function adaptAfter(s: ReturnType<typeof setup>, sizes: number[], start: number) {
  const cands = prefills(3);
  s.at(start);
  for (const size of sizes) s.send(cands, size);
  s.at(start + T);
  s.send(cands, 0);
}

const EXAMPLES: { name: string; sizes: number[]; want: number[][] }[] = [
  { name: "{33,34,34}", sizes: [33, 34, 34], want: [[0, 33], [34, 67], [68, MAX]] },
  {
    name: "{5,10,15,20,24,26}",
    sizes: [26, 5, 20, 10, 24, 15], // order does not matter
    want: [[0, 20], [21, 26], [27, MAX]],
  },
  { name: "a single size 20", sizes: [20], want: [[0, 20], [21, 27], [28, MAX]] },
];

for (const ex of EXAMPLES) {
  Deno.test(`bucket: sizes ${ex.name} adapt the ranges as upstream's tests say`, () => {
    const s = setup();
    adaptAfter(s, ex.sizes, 0);
    assert.deepEqual(s.bounds(), ex.want);
  });
}

Deno.test("bucket: ranges follow the next window once the first has expired", () => {
  const s = setup();
  adaptAfter(s, [5, 10, 15, 20, 24, 26], 0);
  assert.deepEqual(s.bounds(), [[0, 20], [21, 26], [27, MAX]]);
  // Per-bucket load 202/3 = 67 is more than twice the previous 33: re-drawn.
  adaptAfter(s, [10, 20, 30, 40, 45, 57], T + 1000);
  assert.deepEqual(s.bounds(), [[0, 40], [41, 57], [58, MAX]]);
});

Deno.test("bucket: ranges stay while the per-bucket load is within 2x of the last", () => {
  const s = setup();
  adaptAfter(s, [5, 10, 15, 20, 24, 26], 0);
  // 192 in total: 64 per bucket against 33, within a factor of 2.
  adaptAfter(s, [30, 30, 30, 30, 36, 36], T + 1000);
  assert.deepEqual(s.bounds(), [[0, 20], [21, 26], [27, MAX]]);
});

Deno.test("bucket: nothing adapts before the interval or from an empty window", () => {
  const s = setup();
  const cands = prefills(3);
  for (const size of [33, 34, 34]) s.send(cands, size);
  s.at(T - 1);
  s.send(cands, 0);
  assert.deepEqual(s.bounds(), [[0, 1364], [1365, 2729], [2730, MAX]]);
  s.at(10 * T); // the window is long gone
  s.send(cands, 0);
  assert.deepEqual(s.bounds(), [[0, 1364], [1365, 2729], [2730, MAX]]);
});

Deno.test("bucket: routes by range, or to the least loaded when totals are clearly apart", () => {
  // Two workers: p0 owns 0..2047, p1 2048.. ; thresholds abs 64, rel 1.5 (the defaults).
  const rows: { name: string; before: number[]; size: number; want: string; branch: string }[] = [
    { name: "fresh: by range", before: [], size: 100, want: "p0", branch: "range" },
    { name: "long: by range", before: [], size: 3000, want: "p1", branch: "range" },
    { name: "100 vs 0: both margins", before: [100], size: 100, want: "p1", branch: "imbalanced" },
    { name: "60 vs 0: abs margin not met", before: [60], size: 100, want: "p0", branch: "range" },
    {
      name: "3000 vs 2100: rel margin not met",
      before: [3000, 2100], // p1 gets 3000, then p0 2100 (the least loaded)
      size: 3000,
      want: "p1",
      branch: "range",
    },
    {
      name: "3000 vs 1000: both margins",
      before: [3000, 1000],
      size: 3000,
      want: "p0",
      branch: "imbalanced",
    },
  ];
  for (const row of rows) {
    const s = setup();
    const cands = prefills(2);
    for (const size of row.before) s.send(cands, size);
    s.branches.length = 0;
    assert.equal(s.send(cands, row.size), row.want, row.name);
    assert.deepEqual(s.branches, [row.branch], row.name);
  }
});

Deno.test("bucket: token ids, when known, are the size", () => {
  const s = setup();
  const cands = prefills(2);
  const r = request("short", { tokens: Array.from({ length: 3000 }, (_, i) => i) });
  assert.equal(s.p.select(cands, r)?.id, "p1");
});

Deno.test("bucket: a removed worker leaves the ranges, which are re-split over the rest", () => {
  const s = setup();
  const [p0, p1, p2] = prefills(3);
  s.send([p0, p1, p2], 1);
  s.p.onWorkerRemoved("p1");
  assert.deepEqual(s.p.ranges("m").map((r) => [r.worker, r.lo, r.hi]), [
    ["p0", 0, 2047],
    ["p2", 2048, MAX],
  ]);
  assert.equal(s.send([p0, p2], 2000), "p0");
  // Seen again, it joins at the end.
  s.send([p0, p1, p2], 0);
  assert.deepEqual(s.p.ranges("m").map((r) => r.worker), ["p0", "p2", "p1"]);
});

Deno.test("bucket: an unavailable range owner falls back to the least loaded candidate", () => {
  const s = setup({ abs: 1e9 }); // never imbalanced: the fallback is what picks
  const [p0, p1, p2] = prefills(3);
  s.send([p0, p1, p2], 100); // p0
  s.send([p0, p1, p2], 3000); // p2
  s.branches.length = 0;
  // 2000 is p1's (1365..2729); p1 is not a candidate now, p0 has the least.
  assert.equal(s.send([p0, p2], 2000), "p0");
  assert.deepEqual(s.branches, ["fallback"]);
  assert.deepEqual(s.p.ranges("m").map((r) => r.worker), ["p0", "p1", "p2"], "p1 keeps its range");
});

Deno.test("bucket: an idle window expires, so old totals stop steering requests", () => {
  const run = (idleMs: number) => {
    const s = setup();
    const cands = prefills(2);
    s.send(cands, 4000); // p1 by range, totals 0 vs 4000
    s.at(idleMs);
    return [s.send(cands, 3000), s.branches.at(-1)];
  };
  assert.deepEqual(run(T - 1000), ["p0", "imbalanced"]);
  assert.deepEqual(run(T + 1000), ["p1", "range"]);
  assert.deepEqual(run(100 * T), ["p1", "range"]);
});

Deno.test("bucket: models have separate ranges and totals", () => {
  const s = setup();
  const cands = prefills(2);
  s.send(cands, 100); // model m: p0
  const other = { model: "other" };
  assert.equal(s.p.select(cands, request("x".repeat(100), other))?.id, "p0", "not imbalanced");
  assert.equal(s.p.select(cands, request("x", { model: null }))?.id, "p0");
  assert.equal(s.p.ranges("unknown").length, 2);
});

Deno.test("bucket: candidates that are not prefill workers get a uniform random pick", () => {
  const s = setup({ seed: 7 });
  const cands = [view("r0"), view("r1"), view("r2")];
  const counts = new Map<string, number>();
  for (let i = 0; i < 3000; i++) {
    const id = s.send(cands, 100)!;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  for (const c of cands) assert.ok(Math.abs(counts.get(c.id)! - 1000) < 100, `${c.id}`);
  assert.deepEqual(new Set(s.branches), new Set(["random"]));
  assert.deepEqual(s.p.ranges("m"), []);
  assert.equal(s.p.select([], request()), null);
  assert.equal(s.branches.at(-1), "no_candidates");
});

/** Picks for a seeded sequence of sizes, times and candidate churn. */
function churnRun(seed: number): (string | undefined)[] {
  const s = setup({ seed });
  const rnd = seededRandom(seed);
  const pool = prefills(6);
  let cands = pool.slice(0, 4);
  const picks: (string | undefined)[] = [];
  for (let i = 0; i < 3000; i++) {
    s.at(i * 7);
    const roll = rnd();
    if (roll < 0.02 && cands.length > 1) {
      const gone = cands[Math.floor(rnd() * cands.length)];
      cands = cands.filter((c) => c !== gone);
      if (rnd() < 0.5) s.p.onWorkerRemoved(gone.id);
    } else if (roll < 0.04) {
      const missing = pool.filter((w) => !cands.includes(w));
      if (missing.length) cands = [...cands, missing[Math.floor(rnd() * missing.length)]];
    }
    const pick = s.send(cands, Math.floor(rnd() * 5000));
    assert.ok(cands.some((c) => c.id === pick), `step ${i}: ${pick}`);
    picks.push(pick);
  }
  return picks;
}

Deno.test("bucket: the same inputs give the same picks, under churn", () => {
  assert.deepEqual(churnRun(3), churnRun(3));
});

interface Workload {
  /** Requests per second over 4 prefill workers, for 30 s (six windows). */
  rate: number;
  /** Short prompts are 100..300 tokens and long ones 3000..5000; else exactly 200 and 4000. */
  varied: boolean;
}

/** max / mean of the per-worker prefill token totals of one run: 70% short, 30% long prompts. */
function spread(w: Workload, seed: number, route: (c: WorkerView[], tokens: number[]) => string) {
  const rnd = seededRandom(seed);
  const cands = prefills(4);
  const totals = new Map<string, number>();
  for (let i = 0; i < 30 * w.rate; i++) {
    const long = rnd() < 0.3;
    const jitter = w.varied ? Math.floor(rnd() * (long ? 2001 : 201)) - (long ? 1000 : 100) : 0;
    const size = (long ? 4000 : 200) + jitter;
    const id = route(cands, new Array(size).fill(1));
    totals.set(id, (totals.get(id) ?? 0) + size);
  }
  const per = cands.map((c) => totals.get(c.id) ?? 0);
  return Math.max(...per) / (per.reduce((a, b) => a + b, 0) / per.length);
}

/** Mean over seeds 1..8 of `spread`, for bucket (on a clock moving with the rate) and round_robin. */
function compare(w: Workload) {
  const mean = (f: (seed: number) => number) => {
    let sum = 0;
    for (let seed = 1; seed <= 8; seed++) sum += f(seed);
    return Math.round(sum / 8 * 1000) / 1000;
  };
  const bucket = mean((seed) => {
    const s = setup();
    let i = 0;
    return spread(w, seed, (cands, tokens) => {
      s.at(i++ * 1000 / w.rate);
      return s.p.select(cands, request("", { tokens }))!.id;
    });
  });
  const roundRobin = mean((seed) => {
    const rr = new RoundRobinPolicy();
    return spread(w, seed, (cands, tokens) => rr.select(cands, request("", { tokens }))!.id);
  });
  return { bucket, roundRobin };
}

const close = (got: number, want: number, what: string) =>
  assert.ok(Math.abs(got - want) <= 0.02, `${what}: ${got}, expected ${want} ± 0.02`);

Deno.test("bucket: spreads mixed short/long prompts more evenly than round_robin", () => {
  // Round robin is blind to size: whoever draws more long prompts carries more prefill work.
  const rows = [
    { rate: 4, bucket: 1.127, roundRobin: 1.307 },
    { rate: 20, bucket: 1.088, roundRobin: 1.135 },
  ];
  for (const row of rows) {
    const got = compare({ rate: row.rate, varied: true });
    close(got.bucket, row.bucket, `${row.rate}/s bucket`);
    close(got.roundRobin, row.roundRobin, `${row.rate}/s round_robin`);
    assert.ok(got.bucket < got.roundRobin, `${row.rate}/s`);
  }
});

Deno.test("bucket: no more even than round_robin at high rates or with exactly two sizes", () => {
  // At 100/s round robin's law of large numbers catches up, while bucket's ranges stay as drawn
  // from one window's sample (they move only when the load changes 2x).
  let got = compare({ rate: 100, varied: true });
  close(got.bucket, 1.053, "100/s bucket");
  close(got.roundRobin, 1.046, "100/s round_robin");
  // SMG's boundary walk cannot split one size between workers: every 200- and 4000-token prompt
  // lands in the first range, whose owner runs up to the imbalance threshold (1.5x) before the
  // least-loaded override takes over. Recorded so nobody promises more than the algorithm does.
  got = compare({ rate: 20, varied: false });
  close(got.bucket, 1.266, "two sizes, bucket");
  close(got.roundRobin, 1.11, "two sizes, round_robin");
});
