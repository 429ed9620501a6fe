/**
 * The status page's JSON snapshot, the contract scripts read: every documented field with its
 * value for workers in several states (in flight, backlog, failures, breaker, reported cache,
 * engine load), sample times converted to Unix milliseconds, `since` handing out only newer
 * samples, and the mesh's members and streams (null without a mesh).
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { RoutingHistory } from "../../lib/dashboard/history.ts";
import {
  type DashboardMesh,
  snapshot,
  SNAPSHOT_SCHEMA,
  type SnapshotDeps,
} from "../../lib/dashboard/snapshot.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { workerSetup } from "../support/workers.ts";

function setup(mesh: DashboardMesh | null = null) {
  const clock = new FakeClock(5000);
  const metrics = new Metrics();
  const { registry, manager } = workerSetup(clock);
  const history = new RoutingHistory({ metrics, clock });
  const deps: SnapshotDeps = {
    workers: () => registry.all(),
    metrics,
    history,
    clock,
    wallClock: () => 1_700_000_000_000 + clock.now(),
    startedAt: 0,
    policy: "cache_aware",
    draining: () => false,
    mesh: () => mesh,
    models: () => [{ model: "m1", charsPerToken: 7.987, samples: 9, source: "answers" }],
  };
  return { clock, metrics, manager, history, deps };
}

Deno.test("snapshot: the documented fields of a gateway and its workers", () => {
  const { clock, metrics, manager, deps } = setup();
  const a = manager.add({ url: "http://10.0.0.1:8000", models: ["m1"] });
  const b = manager.add({ url: "http://10.0.0.2:8000" });
  a.setStatus("ready");
  a.ownInFlight = 3;
  a.chargePrefill(1200.4);
  a.requestsTotal = 40;
  a.reportedPromptTokens = 1000;
  a.reportedCachedTokens = 250;
  for (let i = 0; i < 4; i++) a.textRatio.observe(800, 100);
  a.load = {
    runningRequests: 2,
    waitingRequests: 1,
    waitingUncachedTokens: null,
    usedTokens: null,
    maxTokens: null,
    tokenUsage: 0.41234,
    genThroughput: null,
    cacheHitRate: 0.3333333,
    source: "loads",
    details: [],
  };
  metrics.workerRequests.with(b.url, "failure").inc(5);
  metrics.workerRequests.with(b.url, "success").inc(9);
  while (b.breaker.state(clock.now()) !== "open") b.breaker.record("failure", clock.now());
  const failures = b.breaker.consecutiveFailures;
  b.progress.stall(clock.now(), 1000);
  metrics.progressMisses.with(b.url, "idle").inc();
  metrics.progressMisses.with(b.url, "head").inc();
  metrics.continuations.with(b.url, "continued").inc();
  metrics.continuations.with(b.url, "completed").inc();
  metrics.continuations.with(b.url, "blocked").inc();

  const s = snapshot(deps, 0);
  assert.equal(s.schema, SNAPSHOT_SCHEMA);
  assert.equal(s.time_unix_ms, 1_700_000_005_000);
  assert.equal(s.uptime_secs, 5);
  assert.equal(s.interval_ms, 1000);
  assert.equal(s.policy, "cache_aware");
  assert.equal(s.draining, false);
  assert.equal(s.mesh, null);
  assert.deepEqual(s.routing, { seq: 0, samples: [] });
  assert.deepEqual(s.models, [
    { model: "m1", chars_per_token: 7.99, samples: 9, source: "answers" },
  ]);
  assert.deepEqual(s.workers, [
    {
      id: a.id,
      url: "http://10.0.0.1:8000",
      model: "m1",
      type: "regular",
      connection: "http",
      origin: "local",
      status: "ready",
      breaker: "closed",
      consecutive_failures: 0,
      overloaded: false,
      stalled: false,
      deadline_misses_total: 0,
      streams_broken_total: 0,
      streams_continued_total: 0,
      in_flight: 3,
      prefill_backlog_tokens: 1200,
      requests_total: 40,
      errors_total: 0,
      chars_per_token: 8,
      cached_share: 0.25,
      engine_cache_hit_rate: 0.333,
      running_requests: 2,
      waiting_requests: 1,
      kv_usage: 0.412,
    },
    {
      id: b.id,
      url: "http://10.0.0.2:8000",
      model: null,
      type: "regular",
      connection: "http",
      origin: "local",
      status: "pending",
      breaker: "open",
      consecutive_failures: failures,
      overloaded: false,
      stalled: true,
      deadline_misses_total: 2,
      streams_broken_total: 3,
      streams_continued_total: 2,
      in_flight: 0,
      prefill_backlog_tokens: 0,
      requests_total: 0,
      errors_total: 5,
      chars_per_token: null,
      cached_share: null,
      engine_cache_hit_rate: null,
      running_requests: null,
      waiting_requests: null,
      kv_usage: null,
    },
  ]);
  // JSON all the way: what a script gets is what the object says.
  assert.deepEqual(JSON.parse(JSON.stringify(s)), s);
});

Deno.test("snapshot: samples newer than `since`, stamped in Unix milliseconds", () => {
  const { clock, metrics, history, deps } = setup();
  history.sample();
  for (let i = 0; i < 3; i++) {
    metrics.routerRequests.with("http", "regular", "http", "m", "chat", "false").inc(i + 1);
    clock.advance(1000);
    history.sample();
  }
  clock.advance(500);
  const all = snapshot(deps, 0).routing as { seq: number; samples: Record<string, unknown>[] };
  assert.equal(all.seq, 3);
  assert.deepEqual(all.samples.map((x) => x.requests_per_sec), [1, 2, 3]);
  assert.deepEqual(
    all.samples.map((x) => x.time_unix_ms),
    [1_700_000_006_000, 1_700_000_007_000, 1_700_000_008_000],
  );
  assert.deepEqual(Object.keys(all.samples[0]), [
    "seq",
    "time_unix_ms",
    "requests_per_sec",
    "errors_per_sec",
    "branches_per_sec",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "latency_p50_ms",
    "latency_p99_ms",
    "predictions_per_sec",
    "prediction_error_mean",
    "prediction_within_0_1",
    "mesh_lag_p50_ms",
    "mesh_lag_p99_ms",
  ]);
  const newer = snapshot(deps, 2).routing as { samples: { seq: number }[] };
  assert.deepEqual(newer.samples.map((x) => x.seq), [3]);
});

Deno.test("snapshot: the mesh's members, which streams are open and what they queue", () => {
  const mesh: DashboardMesh = {
    name: "a",
    status: "ALIVE",
    localHealth: 1,
    failure: null,
    members: [
      { name: "a", address: "10.0.0.1:39527", status: "ALIVE", incarnation: 2, stream: false },
      { name: "b", address: "10.0.0.2:39527", status: "ALIVE", incarnation: 0, stream: true },
      { name: "c", address: "10.0.0.3:39527", status: "SUSPECTED", incarnation: 1, stream: false },
    ],
    queued: (peer) => (peer === "b" ? 7 : 0),
    store: { workers: { live: 4, tombstones: 1 } },
  };
  const { deps } = setup(mesh);
  assert.deepEqual(snapshot(deps, 0).mesh, {
    name: "a",
    status: "ALIVE",
    local_health: 1,
    failure: null,
    members: [
      {
        name: "a",
        address: "10.0.0.1:39527",
        status: "ALIVE",
        incarnation: 2,
        self: true,
        stream_open: null,
        queued_frames: null,
      },
      {
        name: "b",
        address: "10.0.0.2:39527",
        status: "ALIVE",
        incarnation: 0,
        self: false,
        stream_open: true,
        queued_frames: 7,
      },
      {
        name: "c",
        address: "10.0.0.3:39527",
        status: "SUSPECTED",
        incarnation: 1,
        self: false,
        stream_open: false,
        queued_frames: null,
      },
    ],
    streams_open: 1,
    store: { workers: { live: 4, tombstones: 1 } },
  });
});
