/**
 * The routing history on fake time: one sample per interval from the second reading on, rates
 * from counter differences (a reset reads as zero, never negative), latency quantiles and the
 * prediction figures over the trailing window, the mesh's lag when given, the kept length, and
 * `since` handing out only newer samples; `run` samples until its signal aborts.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { RoutingHistory } from "../../lib/dashboard/history.ts";
import { HistogramSeries } from "../../lib/metrics/fast.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { timerSet } from "../../support/wait.ts";

const route = ["http", "regular", "http", "m", "chat"];

function setup(o: { keep?: number; windowSamples?: number; lag?: HistogramSeries } = {}) {
  const metrics = new Metrics();
  const clock = new FakeClock();
  const lag = o.lag;
  const h = new RoutingHistory({
    metrics,
    clock,
    keep: o.keep,
    windowSamples: o.windowSamples,
    meshLag: lag ? () => [{ s: lag }] : undefined,
  });
  return { metrics, clock, h };
}

Deno.test("history: rates per second by branch, from the second reading on", () => {
  const { metrics: m, clock, h } = setup();
  h.sample();
  assert.deepEqual(h.since(0), [], "one reading makes no sample");
  m.routerRequests.with(...route, "false").inc(6);
  m.routerRequests.with(...route, "true").inc(4);
  m.routerErrors.with(...route, "backend_error").inc(1);
  m.policyDecisions.with("cache_aware", "hit").inc(7);
  m.policyDecisions.with("cache_aware", "miss").inc(3);
  clock.advance(2000);
  h.sample();
  const [s] = h.since(0);
  assert.equal(s.seq, 1);
  assert.equal(s.at, 2000);
  assert.equal(s.requestsPerSec, 5);
  assert.equal(s.errorsPerSec, 0.5);
  assert.deepEqual(s.branchesPerSec, { "cache_aware:hit": 3.5, "cache_aware:miss": 1.5 });
  clock.advance(1000);
  h.sample();
  assert.deepEqual(h.since(1)[0].branchesPerSec, { "cache_aware:hit": 0, "cache_aware:miss": 0 });
});

Deno.test("history: a counter that went down (reset) reads as zero, not negative", () => {
  const { metrics: m, clock, h } = setup();
  m.policyDecisions.with("round_robin", "pick").inc(10);
  h.sample();
  m.policyDecisions.reset();
  m.policyDecisions.with("round_robin", "pick").inc(2);
  clock.advance(1000);
  h.sample();
  assert.equal(h.since(0)[0].branchesPerSec["round_robin:pick"], 0);
});

Deno.test("history: TTFT quantiles over the trailing window, null when nothing streamed", () => {
  const { metrics: m, clock, h } = setup({ windowSamples: 3 });
  const ttft = m.ttft.with("http", "regular", "m", "chat");
  h.sample();
  clock.advance(1000);
  h.sample();
  assert.equal(h.since(0)[0].ttftP50Ms, null);
  for (let i = 0; i < 99; i++) ttft.observe(0.004); // (1 ms, 5 ms]
  ttft.observe(0.2); // (100 ms, 250 ms]
  clock.advance(1000);
  h.sample();
  let s = h.since(1)[0];
  assert.ok(s.ttftP50Ms! > 1 && s.ttftP50Ms! <= 5, `p50 ${s.ttftP50Ms}`);
  assert.ok(s.ttftP99Ms! > 1 && s.ttftP99Ms! <= 5, `p99 ${s.ttftP99Ms}`);
  assert.equal(s.latencyP50Ms, null, "no routed request time was observed");
  ttft.observe(0.2);
  clock.advance(1000);
  h.sample();
  s = h.since(2)[0];
  assert.ok(s.ttftP99Ms! > 100, `the window still holds the slow ones: p99 ${s.ttftP99Ms}`);
  // Three readings later the window has moved past every observation.
  for (let i = 0; i < 3; i++) {
    clock.advance(1000);
    h.sample();
  }
  assert.equal(h.since(h.seq - 1)[0].ttftP50Ms, null);
});

Deno.test("history: prediction error mean and share within ±0.1, and the mesh's lag", () => {
  const lag = new HistogramSeries([0.01, 0.1, 1]);
  const { metrics: m, clock, h } = setup({ lag });
  const err = m.cachePredictionError.with("cache_aware");
  h.sample();
  for (const v of [0, 0.02, -0.04, 0.6]) err.observe(v);
  lag.observe(0.05);
  clock.advance(1000);
  h.sample();
  const [s] = h.since(0);
  assert.equal(s.predictionsPerSec, 4);
  assert.ok(Math.abs(s.predictionErrorMean! - 0.145) < 1e-9);
  assert.equal(s.predictionWithin10, 0.75);
  assert.ok(s.meshLagP50Ms! > 10 && s.meshLagP50Ms! <= 100, `lag p50 ${s.meshLagP50Ms}`);
  // A lag series that appears with its first observation counts it.
  let late: HistogramSeries | null = null;
  const metrics = new Metrics();
  const clock2 = new FakeClock();
  const h2 = new RoutingHistory({
    metrics,
    clock: clock2,
    meshLag: () => (late ? [{ s: late }] : []),
  });
  h2.sample();
  late = new HistogramSeries([0.01, 0.1, 1]);
  late.observe(0.5);
  clock2.advance(1000);
  h2.sample();
  assert.ok(h2.since(0)[0].meshLagP99Ms! > 100, `first lag ${h2.since(0)[0].meshLagP99Ms}`);
  const { h: plain } = setup();
  plain.sample();
  plain.sample();
  assert.equal(plain.since(0)[0].meshLagP99Ms, null, "no mesh, no lag");
});

Deno.test("history: keeps the last `keep` samples; since() hands out only newer ones", () => {
  const { clock, h } = setup({ keep: 3 });
  for (let i = 0; i < 6; i++) {
    h.sample();
    clock.advance(1000);
  }
  assert.equal(h.seq, 5);
  assert.deepEqual(h.since(0).map((s) => s.seq), [3, 4, 5]);
  assert.deepEqual(h.since(3).map((s) => s.seq), [4, 5]);
  assert.deepEqual(h.since(5), []);
  assert.deepEqual(h.since(99), []);
});

Deno.test("history: run() samples every interval until its signal aborts", async () => {
  const { clock, h } = setup();
  const stop = new AbortController();
  const done = h.run(stop.signal);
  await timerSet(clock, "the first pause");
  assert.equal(h.seq, 0, "the first reading makes no sample");
  clock.advance(1000);
  await timerSet(clock, "the second pause");
  clock.advance(1000);
  await timerSet(clock, "the third pause");
  assert.equal(h.seq, 2);
  stop.abort();
  await done;
  assert.equal(clock.pending, 0, "no timer left behind");
});
