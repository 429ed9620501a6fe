/**
 * The expected-wait model shared by least_load and power_of_two: each term against SMG's
 * worked numbers, the fallbacks for missing data, stale-report expiry, the tie-break and the
 * since-report credit.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import {
  argminUniform,
  defaultTuning,
  drainWait,
  expectedWaits,
  freshLoad,
  kvPressure,
  minExpectedWait,
  nominalThroughput,
  queuedTokens,
  reportedWait,
  reportMaxAgeMs,
  requestTokens,
  sanitizeTuning,
  SinceReportCredit,
  throughputOf,
  type WaitContext,
} from "../../lib/policies/expected_wait.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import type { LoadSnapshot, WorkerView } from "../../lib/core/types.ts";
import { load, request, view } from "../../support/policies.ts";

const close = (got: number, want: number, what: string) =>
  assert.ok(Math.abs(got - want) < 1e-9, `${what}: got ${got}, want ${want}`);

Deno.test("expected_wait: KV pressure λ·k/(1−k) with k clamped to [0, 0.999]", () => {
  const table: [usage: number, lambda: number, want: number][] = [
    [0, 0.15, 0],
    [0.2, 0.15, 0.0375], // SMG's worked number
    [0.9, 0.15, 1.35],
    [0.98, 2, 98], // SMG: the barrier at λ = 2
    [1, 0.15, 0.15 * 0.999 / 0.001], // full cache: finite, ≈ 150 s
    [7, 0.15, 0.15 * 0.999 / 0.001],
    [-0.5, 0.15, 0],
    [NaN, 0.15, 0],
    [0.5, 0, 0],
  ];
  for (const [k, l, want] of table) close(kvPressure(k, l), want, `k=${k} λ=${l}`);
});

Deno.test("expected_wait: queued tokens prefer the reported count, else waiting × p̄", () => {
  const table: [over: Parameters<typeof load>[0], want: number][] = [
    [{ waitingUncachedTokens: 8000, waitingRequests: 3 }, 8000],
    [{ waitingUncachedTokens: 500, waitingRequests: 200 }, 500],
    [{ waitingUncachedTokens: null, waitingRequests: 64 }, 64 * 1024],
    [{ waitingUncachedTokens: 0, waitingRequests: 3 }, 3 * 1024],
    [{ waitingUncachedTokens: null, waitingRequests: 0 }, 0],
    [{ waitingUncachedTokens: -5, waitingRequests: -2 }, 0],
  ];
  for (const [over, want] of table) {
    assert.equal(queuedTokens(load(over), 1024), want, JSON.stringify(over));
  }
});

Deno.test("expected_wait: throughput is the reported one, else the default", () => {
  const table: [number | null, number][] = [[500, 500], [0, 2000], [null, 2000], [-1, 2000], [
    Infinity,
    2000,
  ]];
  for (const [t, want] of table) {
    assert.equal(throughputOf(load({ genThroughput: t }), 2000), want, String(t));
  }
});

Deno.test("expected_wait: reported wait reproduces upstream's worked numbers", () => {
  const t = defaultTuning();
  const at = (over: Parameters<typeof load>[0], credit = 0) =>
    reportedWait(load({ genThroughput: 100, tokenUsage: 0.2, ...over }), credit, t);
  close(at({ waitingUncachedTokens: 8000 }), 80.0375, "8000 queued");
  close(at({ waitingUncachedTokens: 1000 }), 10.0375, "1000 queued");
  close(at({ waitingRequests: 64 }), 64 * 1024 / 100 + 0.0375, "64 waiting, no tokens");
  close(at({ waitingUncachedTokens: 1000 }, 2100), 31.0375, "1000 queued + 2100 credited");
  close(at({}), 0.0375, "empty queue: only the KV term");
});

Deno.test("expected_wait: a request weighs its token count when known, else p̄", () => {
  assert.equal(requestTokens(request("x", { tokens: [1, 2, 3] }), 1024), 3);
  assert.equal(requestTokens(request("x", { tokens: null }), 1024), 1024);
  assert.equal(requestTokens(request("x", { tokens: [] }), 1024), 1024);
});

/** SMG's formula with its default tuning (what most of these tests check). */
const smgTuning = () => ({ ...defaultTuning(), waitModel: "smg" as const });

/** A scoring context at `now` with SMG's default tuning, seeded ties and an optional credit. */
function ctx(over: Partial<WaitContext> = {}): WaitContext {
  return {
    tuning: smgTuning(),
    now: 0,
    maxAgeMs: 30_000,
    credit: new SinceReportCredit(),
    random: seededRandom(1),
    ...over,
  };
}

Deno.test("expected_wait: dark fleet scores raw in-flight (join-shortest-queue)", () => {
  const dark = [view("a", { inFlight: 5 }), view("b", { inFlight: 2 }), view("c", { inFlight: 3 })];
  assert.deepEqual(minExpectedWait(dark, ctx()), { index: 1, score: 2, dark: true, skipped: 0 });
});

Deno.test("expected_wait: a partial gap scores dark workers by drain time", () => {
  close(drainWait(5, 100, 1024), 51.2, "5 in-flight at 100 tok/s");
  close(drainWait(-1, 100, 1024), 0, "negative in-flight");
  const slow = view("b", { load: load({ genThroughput: 100, waitingUncachedTokens: 4000 }) }); // 40 s
  const got = minExpectedWait([view("a", { inFlight: 5 }), slow], ctx());
  assert.deepEqual(got, { index: 1, score: 40, dark: false, skipped: 0 });
  // The credit counts for the reporting worker only: the dark one's in-flight already holds it.
  const credit = new SinceReportCredit();
  credit.add(slow, 1500); // b: 55 s
  assert.equal(minExpectedWait([view("a", { inFlight: 5 }), slow], ctx({ credit }))?.index, 0);
});

Deno.test("expected_wait: nominal throughput is the mean of the considered reporters", () => {
  // a (dark, 5 in-flight) against b's 6 s queue: a's drain time depends on the nominal rate.
  const a = view("a", { inFlight: 5 });
  const b = view("b", { load: load({ genThroughput: 1000, waitingUncachedTokens: 6000 }) });
  const rate = (t: number | null) =>
    view("r", { load: load({ genThroughput: t, tokenUsage: 0.999 }) });
  const table: [extra: WorkerView[], wantScoreOfA: number][] = [
    [[], 5 * 1024 / 1000],
    [[rate(3000)], 5 * 1024 / 2000], // mean of 1000 and 3000
    [[rate(0), rate(null)], 5 * 1024 / 1000], // non-positive reports do not count
  ];
  for (const [extra, want] of table) {
    const got = minExpectedWait([a, b, ...extra], ctx());
    assert.equal(got?.index, 0);
    close(got!.score, want, `${extra.length} extra`);
  }
  // No reporter states a throughput: the default (2000) stands in.
  const flat = view("f", { load: load({ waitingUncachedTokens: 6000 }) }); // 3 s
  close(minExpectedWait([a, flat], ctx())!.score, 5 * 1024 / 2000, "default rate");
});

Deno.test("expected_wait: skipped workers are left out, also from the nominal rate", () => {
  const a = view("a", { inFlight: 5 });
  const fast = view("fast", { load: load({ genThroughput: 1e6, waitingRequests: 9 }) });
  const slow = view("slow", { load: load({ genThroughput: 100, waitingUncachedTokens: 4000 }) });
  const skip = (_w: WorkerView, l: LoadSnapshot) => l.waitingRequests >= 9;
  assert.deepEqual(minExpectedWait([a, fast, slow], ctx({ skip })), {
    index: 2,
    score: 40,
    dark: false,
    skipped: 1,
  });
  assert.equal(minExpectedWait([fast], ctx({ skip })), null, "all skipped");
  assert.equal(minExpectedWait([], ctx()), null, "no candidates");
});

Deno.test("expected_wait: exact ties are broken uniformly", () => {
  // Three-way tie among a, c, d: 9,000 draws, expected 3,000 each (sd ≈ 45); allow ±200.
  const cands = [1, 2, 1, 1].map((n, i) => view(`t${i}`, { inFlight: n }));
  const c = ctx({ random: seededRandom(7) });
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 9000; i++) counts[minExpectedWait(cands, c)!.index]++;
  assert.equal(counts[1], 0);
  for (const i of [0, 2, 3]) assert.ok(Math.abs(counts[i] - 3000) <= 200, String(counts));
});

Deno.test("expected_wait: the array form scores like the argmin form", () => {
  const t = smgTuning();
  const rep = load({ genThroughput: 100, waitingUncachedTokens: 4000 });
  const cands = [view("a", { inFlight: 5 }), view("b", { load: rep }), view("c", { load: rep })];
  const got = expectedWaits(cands, [null, rep, rep], (w) => (w.id === "c" ? 1000 : 0), t);
  assert.equal(got.dark, false);
  close(got.scores[0], 51.2, "dark: drain time at the nominal rate");
  close(got.scores[1], 40, "reporting");
  close(got.scores[2], 50, "reporting, credited");
  assert.equal(argminUniform(got.scores, seededRandom(1)), 1);
  assert.equal(minExpectedWait(cands, ctx())?.index, 1);
  const dark = expectedWaits(cands.slice(0, 1), [null], () => 0, t);
  assert.deepEqual(dark, { scores: [5], dark: true });
  assert.equal(argminUniform([], seededRandom(1)), -1);
  assert.equal(nominalThroughput([load({ genThroughput: 100 }), null, load()], 2000), 100);
  assert.equal(nominalThroughput([], 2000), 2000);
});

Deno.test("expected_wait: a report older than three load-monitor intervals is absent", () => {
  const config = defaultConfig(); // interval 10 s
  assert.equal(reportMaxAgeMs(config), 30_000);
  const l = load();
  const w = view("a", { load: l, loadAt: 1000 });
  assert.equal(freshLoad(w, 1000, 30_000), l);
  assert.equal(freshLoad(w, 31_000, 30_000), l, "exactly three intervals old: still used");
  assert.equal(freshLoad(w, 31_001, 30_000), null);
  assert.equal(freshLoad(view("b"), 0, 30_000), null, "never reported");
  config.loadMonitor.intervalSecs = 0.2;
  assert.equal(reportMaxAgeMs(config), 3000, "interval floored at 1 s, as the monitor does");
});

Deno.test("expected_wait: credit accumulates until a newer report, and is per worker", () => {
  const c = new SinceReportCredit();
  const a1 = view("a", { load: load(), loadAt: 100 });
  const b = view("b", { load: load(), loadAt: 100 });
  assert.deepEqual([c.tokens(a1), c.requests(a1)], [0, 0]);
  c.add(a1, 1024);
  c.add(a1, 2100);
  c.add(b, 7);
  assert.deepEqual([c.tokens(a1), c.requests(a1)], [3124, 2]);
  const a2 = view("a", { load: load(), loadAt: 200 }); // the monitor delivered a newer report
  assert.deepEqual([c.tokens(a2), c.requests(a2)], [0, 0]);
  c.add(a2, 10);
  assert.deepEqual([c.tokens(a2), c.requests(a2)], [10, 1]);
  assert.deepEqual([c.tokens(b), c.requests(b)], [7, 1], "b untouched");
  c.forget("a");
  assert.deepEqual([c.tokens(a2), c.requests(a2)], [0, 0]);
});

Deno.test("expected_wait: invalid tuning falls back to defaults, as upstream's constructor", () => {
  assert.deepEqual(defaultTuning(), {
    kvPressureWeight: 0.15,
    defaultThroughput: 2000,
    meanPrefillTokens: 1024,
    waitModel: "backlog",
  });
  const smg = "smg" as const;
  assert.deepEqual(
    sanitizeTuning({
      kvPressureWeight: -1,
      defaultThroughput: 0,
      meanPrefillTokens: 0,
      waitModel: smg,
    }),
    { kvPressureWeight: 0.15, defaultThroughput: 2000, meanPrefillTokens: 1, waitModel: smg },
  );
  assert.deepEqual(
    sanitizeTuning({
      kvPressureWeight: NaN,
      defaultThroughput: Infinity,
      meanPrefillTokens: 64,
      waitModel: smg,
    }),
    { kvPressureWeight: 0.15, defaultThroughput: 2000, meanPrefillTokens: 64, waitModel: smg },
  );
});
