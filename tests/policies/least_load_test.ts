/**
 * least_load: one-pick scenario tables (reports, in-flight, staleness → expected worker and
 * branch), then sequences for the since-report credit, the waiting-queue cap and its 503, the
 * tuning flags and worker removal. Covers SMG's least_load test list.
 */

import assert from "node:assert/strict";
import type { LeastLoadConfig } from "../../lib/config/config.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import type { LoadSnapshot, RouteRequest, WorkerView } from "../../lib/core/types.ts";
import { LeastLoadPolicy } from "../../lib/policies/least_load.ts";
import { NO_OBSERVER } from "../../lib/policies/policy.ts";
import { deps, load, request, tally, view } from "../../support/policies.ts";

/** A worker reporting `over` at `loadAt` ms. */
function rep(id: string, over: Partial<LoadSnapshot>, extra: Partial<WorkerView> = {}) {
  return view(id, { load: load(over), loadAt: 0, ...extra });
}

interface Setup {
  seed?: number;
  now?: number;
  leastLoad?: Partial<LeastLoadConfig>;
}

/** A policy with recorded decisions. */
function policy(s: Setup = {}) {
  const d = deps(s.seed ?? 1);
  const branches: string[] = [];
  d.now = () => s.now ?? 0;
  Object.assign(d.config.leastLoad, s.leastLoad ?? {});
  d.observer = { ...NO_OBSERVER, decision: (_p, b) => branches.push(b) };
  return { p: new LeastLoadPolicy(d), branches };
}

const pick = (p: LeastLoadPolicy, cands: WorkerView[], r: RouteRequest = request()) =>
  p.select(cands, r)?.id;

interface Row extends Setup {
  name: string;
  cands: WorkerView[];
  want: string;
  branch: string;
}

const ROWS: Row[] = [
  {
    name: "cold start: no reports → lowest in-flight",
    cands: [view("a", { inFlight: 5 }), view("b", { inFlight: 0 })],
    want: "b",
    branch: "dark_fleet",
  },
  {
    name: "lower queued token work (8000 vs 1000 at 100 tok/s)",
    cands: [
      rep("a", { waitingUncachedTokens: 8000, genThroughput: 100, tokenUsage: 0.2 }),
      rep("b", { waitingUncachedTokens: 1000, genThroughput: 100, tokenUsage: 0.2 }),
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "requests-only reports ranked by waiting × p̄ (64 vs 6)",
    cands: [rep("a", { waitingRequests: 64 }), rep("b", { waitingRequests: 6 })],
    want: "b",
    branch: "scored",
  },
  {
    name: "reported queue tokens win over the waiting-requests estimate",
    cands: [
      rep("a", { waitingRequests: 200, waitingUncachedTokens: 500 }), // 0.25 s, not 102 s
      rep("b", { waitingRequests: 1 }), // 0.512 s
    ],
    want: "a",
    branch: "scored",
  },
  {
    name: "empty queues are not penalised: the KV term decides",
    cands: [rep("a", { tokenUsage: 0.5 }), rep("b", { tokenUsage: 0.1 })],
    want: "b",
    branch: "scored",
  },
  {
    name: "same queue, faster worker (50 vs 500 tok/s)",
    cands: [
      rep("a", { waitingUncachedTokens: 1000, genThroughput: 50 }),
      rep("b", { waitingUncachedTokens: 1000, genThroughput: 500 }),
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "zero throughput falls back to the default (1000 tok @ 2000/s beats 800 @ 1000/s)",
    cands: [
      rep("a", { waitingUncachedTokens: 1000, genThroughput: 0 }),
      rep("b", { waitingUncachedTokens: 800, genThroughput: 1000 }),
    ],
    want: "a",
    branch: "scored",
  },
  {
    name: "dark worker in time units: 5 in-flight ≈ 51 s loses to a 40 s queue",
    cands: [
      view("a", { inFlight: 5 }),
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 100 }),
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "dark worker in time units: 3 in-flight ≈ 31 s beats a 40 s queue",
    cands: [
      view("a", { inFlight: 3 }),
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 100 }),
    ],
    want: "a",
    branch: "scored",
  },
  {
    name: "KV barrier (k = 0.98 → 7.35 s) steers away from a full worker",
    cands: [
      rep("a", { tokenUsage: 0.98 }),
      rep("b", { waitingUncachedTokens: 2000, genThroughput: 2000 }),
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "KV barrier at λ = 2 (98 s) outweighs a long queue",
    leastLoad: { kvPressureWeight: 2 },
    cands: [
      rep("a", { tokenUsage: 0.98 }),
      rep("b", { waitingUncachedTokens: 100_000, genThroughput: 2000 }), // 50 s
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "a report three intervals old is still used",
    now: 30_000,
    cands: [
      rep("a", {}, { inFlight: 10 }),
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 1000 }, { loadAt: 29_000 }),
    ],
    want: "a",
    branch: "scored",
  },
  {
    name: "a stale report counts as absent: idle-looking a is scored by its 10 in-flight",
    now: 30_001,
    cands: [
      rep("a", {}, { inFlight: 10 }), // 10 × 1024 / 1000 ≈ 10.2 s
      rep("b", { waitingUncachedTokens: 4000, genThroughput: 1000 }, { loadAt: 29_000 }), // 4 s
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "every report stale: join-shortest-queue",
    now: 100_000,
    cands: [rep("a", {}, { inFlight: 4 }), rep("b", { waitingRequests: 500 }, { inFlight: 1 })],
    want: "b",
    branch: "dark_fleet",
  },
  {
    name: "the only worker, cap off",
    cands: [rep("a", { waitingRequests: 1000 })],
    want: "a",
    branch: "single",
  },
  {
    name: "cap skips a better-scoring worker at 64 waiting ≥ 48",
    leastLoad: { maxWaitingRequests: 48 },
    cands: [
      rep("a", { waitingRequests: 64, waitingUncachedTokens: 100 }),
      rep("b", { waitingUncachedTokens: 4000 }),
    ],
    want: "b",
    branch: "scored",
  },
  {
    name: "cap 0 is off: 1000 waiting still routes",
    cands: [
      rep("a", { waitingRequests: 1000, waitingUncachedTokens: 100 }),
      rep("b", { waitingUncachedTokens: 4000 }),
    ],
    want: "a",
    branch: "scored",
  },
  {
    name: "cap ignores workers without reports (dark fleet still routes)",
    leastLoad: { maxWaitingRequests: 1 },
    cands: [view("a", { inFlight: 3 }), view("b", { inFlight: 9 })],
    want: "a",
    branch: "dark_fleet",
  },
  {
    name: "cap ignores stale reports",
    leastLoad: { maxWaitingRequests: 1 },
    now: 60_000,
    cands: [rep("a", { waitingRequests: 5 }), rep("b", { waitingRequests: 5 }, { inFlight: 1 })],
    want: "a",
    branch: "dark_fleet",
  },
  {
    name: "cap applies to a single worker under it",
    leastLoad: { maxWaitingRequests: 10 },
    cands: [rep("a", { waitingRequests: 9 })],
    want: "a",
    branch: "scored",
  },
];

for (const row of ROWS) {
  Deno.test(`least_load: ${row.name}`, () => {
    for (const seed of [1, 2, 3]) {
      const { p, branches } = policy({ ...row, seed });
      assert.equal(pick(p, row.cands), row.want, `seed ${seed}`);
      assert.deepEqual(branches, [row.branch]);
    }
  });
}

Deno.test("least_load: declares it needs load reports, not text", () => {
  assert.deepEqual(policy().p.needs, { requestText: false, backendLoads: true });
});

Deno.test("least_load: equal scores spread over every worker (uniform ties)", () => {
  // 400 fresh policies, one pick each over 4 identical workers: 100 expected each (sd ≈ 8.7).
  const cands = ["a", "b", "c", "d"].map((id) => rep(id, { waitingRequests: 2 }));
  const t = tally(
    Array.from({ length: 400 }, (_, s) => policy({ seed: s }).p.select(cands, request())),
  );
  assert.equal(t.size, 4);
  for (const [id, n] of t) assert.ok(Math.abs(n - 100) <= 40, `${id}: ${n}`);
});

Deno.test("least_load: credit spreads a poll interval's arrivals over identical workers", () => {
  const cands = [rep("a", {}), rep("b", {})];
  for (const seed of [1, 2, 3, 4]) {
    const { p } = policy({ seed });
    const picks = Array.from({ length: 10 }, () => pick(p, cands));
    for (let i = 0; i < 10; i += 2) assert.notEqual(picks[i], picks[i + 1], picks.join());
  }
});

Deno.test("least_load: a known token count credits exactly that work", () => {
  const cands = () => [
    rep("a", { waitingUncachedTokens: 1000, genThroughput: 1000 }), // 1 s
    rep("b", { waitingUncachedTokens: 3000, genThroughput: 1000 }), // 3 s
  ];
  const tokens = (n: number) => request("x", { tokens: Array.from({ length: n }, (_, i) => i) });
  const tipped = policy().p;
  assert.equal(pick(tipped, cands(), tokens(2100)), "a"); // a now 3.1 s
  assert.equal(pick(tipped, cands()), "b");
  const notTipped = policy().p;
  assert.equal(pick(notTipped, cands(), tokens(1900)), "a"); // a now 2.9 s
  assert.equal(pick(notTipped, cands()), "a");
});

Deno.test("least_load: a newer report resets the credit; an unchanged one keeps it", () => {
  const a = (loadAt: number) => rep("a", { waitingUncachedTokens: 1000 }, { loadAt }); // 0.5 s
  const b = rep("b", { waitingUncachedTokens: 1200 }, { loadAt: 1000 }); // 0.6 s
  const kept = policy({ now: 5000 }).p;
  assert.equal(pick(kept, [a(1000), b]), "a"); // a credited 1024 tokens → 1.012 s
  assert.equal(pick(kept, [a(1000), b]), "b", "same report: the credit still counts");
  const reset = policy({ now: 5000 }).p;
  assert.equal(pick(reset, [a(1000), b]), "a");
  assert.equal(pick(reset, [a(4000), b]), "a", "newer report: the credit is cleared");
});

Deno.test("least_load: the cap counts requests sent since the report", () => {
  const cands = [
    rep("a", { waitingRequests: 1, waitingUncachedTokens: 100 }),
    rep("b", { waitingUncachedTokens: 4000 }),
  ];
  const { p } = policy({ leastLoad: { maxWaitingRequests: 2 } });
  assert.equal(pick(p, cands), "a"); // 1 waiting + 0 sent < 2
  assert.equal(pick(p, cands), "b"); // 1 waiting + 1 sent = 2: capped
});

Deno.test("least_load: every worker at the cap → 503 no_available_workers with Retry-After", () => {
  const { p, branches } = policy({ leastLoad: { maxWaitingRequests: 48 } });
  for (
    const cands of [
      [rep("a", { waitingRequests: 50 }), rep("b", { waitingRequests: 48 })],
      [rep("solo", { waitingRequests: 60 })], // the single-worker path is not exempt
    ]
  ) {
    assert.throws(() => p.select(cands, request()), (e) => {
      assert.ok(e instanceof GatewayError, String(e));
      assert.equal(e.status, 503);
      assert.equal(e.code, "no_available_workers");
      assert.equal(e.retryAfter, 10, "the load-monitor interval");
      assert.match(e.message, /waiting-queue cap \(48\)/);
      return true;
    });
  }
  assert.deepEqual(branches, ["queue_cap", "queue_cap"]);
  assert.equal(p.select([], request()), null, "no candidates is still null, not 503");
});

Deno.test("least_load: the --least-load-* flags are honoured", () => {
  const table: [Partial<LeastLoadConfig>, WorkerView[], string][] = [
    // λ: a's KV term 0.15 s at the default, 2 s at λ = 2; b is a 0.5 s queue.
    [{}, [rep("a", { tokenUsage: 0.5 }), rep("b", { waitingUncachedTokens: 1000 })], "a"],
    [{ kvPressureWeight: 2 }, [
      rep("a", { tokenUsage: 0.5 }),
      rep("b", { waitingUncachedTokens: 1000 }),
    ], "b"],
    // default throughput: a's 1000 tokens at 2000/s (0.5 s) or 500/s (2 s) vs b's 0.8 s.
    [{ defaultThroughput: 500 }, [
      rep("a", { waitingUncachedTokens: 1000 }),
      rep("b", { waitingUncachedTokens: 800, genThroughput: 1000 }),
    ], "b"],
    // p̄: a's 2 waiting requests are 1.024 s at 1024 tokens, 0.256 s at 256; b is 0.75 s.
    [{}, [rep("a", { waitingRequests: 2 }), rep("b", { waitingUncachedTokens: 1500 })], "b"],
    [{ meanPrefillTokens: 256 }, [
      rep("a", { waitingRequests: 2 }),
      rep("b", { waitingUncachedTokens: 1500 }),
    ], "a"],
  ];
  for (const [leastLoad, cands, want] of table) {
    assert.equal(pick(policy({ leastLoad }).p, cands), want, JSON.stringify(leastLoad));
  }
});

Deno.test("least_load: nominal throughput comes from the candidates, not the whole fleet", () => {
  const { p } = policy();
  const fast = rep("fast", { genThroughput: 1_000_000 });
  const dark = view("a", { inFlight: 5 });
  const slow = rep("b", { waitingUncachedTokens: 4000, genThroughput: 100 });
  assert.equal(pick(p, [fast, dark, slow]), "fast");
  // Without `fast`, a's 5 in-flight drain at b's 100 tok/s (51 s), worse than b's 40 s.
  assert.equal(pick(p, [dark, slow]), "b");
});

Deno.test("least_load: removing a worker drops only its credit", () => {
  const cands = [
    rep("a", { waitingUncachedTokens: 1000 }),
    rep("b", { waitingUncachedTokens: 1000 }),
  ];
  for (const seed of [1, 2, 3, 4, 5]) {
    const { p } = policy({ seed });
    const x = pick(p, cands)!;
    const y = pick(p, cands)!;
    assert.notEqual(x, y);
    p.onWorkerRemoved(x);
    p.onWorkerRemoved("never-seen"); // harmless
    // x starts from zero again while y keeps its 1024 credited tokens: x wins outright.
    assert.equal(pick(p, cands), x, `seed ${seed}`);
  }
});

Deno.test("least_load: the single-worker short-circuit still credits the worker", () => {
  const a = rep("a", { waitingUncachedTokens: 1000 }); // 0.5 s
  const b = rep("b", { waitingUncachedTokens: 2000 }); // 1.0 s
  const { p } = policy();
  assert.equal(pick(p, [a]), "a"); // b was briefly ineligible
  // a holds 1000 + 1024 tokens (1.012 s) until its next report: b is now the shorter wait.
  assert.equal(pick(p, [a, b]), "b");
});
