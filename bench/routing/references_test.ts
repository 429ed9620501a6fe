/**
 * The routing benchmark's judging pieces, which decide what BENCHMARKS.md claims: the upper
 * bound's scaled engine knobs, the oracle's tenant assignment and routing header, the ratios and
 * the verdict on cache_aware, and the PD variant's prompts and spread.
 */

import assert from "node:assert/strict";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { pdGatewayArgs } from "./pd.ts";
import { prompt, SIZES } from "./pd_options.ts";
import { affinityRoute, oracleAssignment, oracleRoute, upperBoundKnobs } from "./references.ts";
import { maxOverMean } from "./report.ts";
import type { Summary } from "./summary.ts";
import { advantageGrows, pointVerdict, relative } from "./verdict.ts";
import { simTokens, Workload } from "./workload.ts";

const KNOBS = [
  "--kv-tokens",
  "32768",
  "--max-running=32",
  "--prefill-chunk",
  "2048",
  "--prefill-tps",
  "8000",
  "--decode-base-ms",
  "6",
  "--decode-per-req-ms",
  "0.35",
  "--seed",
  "0",
];

Deno.test("upper bound: capacity and speed knobs ×N, per-request decode cost ÷N, the rest kept", () => {
  assert.deepEqual(upperBoundKnobs(KNOBS, 4), [
    "--kv-tokens",
    "131072",
    "--max-running=128",
    "--prefill-chunk",
    "8192",
    "--prefill-tps",
    "32000",
    "--decode-base-ms",
    "6",
    "--decode-per-req-ms",
    "0.0875",
    "--seed",
    "0",
  ]);
  assert.throws(() => upperBoundKnobs(KNOBS.slice(2), 4), /no --kv-tokens/);
  assert.throws(() => upperBoundKnobs(["--kv-tokens", "x", ...KNOBS.slice(2)], 4), /not a number/);
});

Deno.test("oracle: every tenant on one worker, expected load balanced within the largest tenant", () => {
  const w = new Workload({ seed: 3, tenants: 24 });
  const plan = oracleAssignment(w, 4);
  assert.equal(plan.worker.length, 24);
  assert.ok(plan.worker.every((i) => i >= 0 && i < 4));
  assert.equal(new Set(plan.worker).size, 4, "every worker gets tenants");
  assert.ok(Math.abs(plan.share.reduce((a, b) => a + b, 0) - 1) < 1e-9);
  // Greedy largest-first: the gap between bins is at most the largest single tenant's share.
  const largest = Math.max(...w.tenants.map((t) => w.popularity(t.index) * simTokens(t.system)));
  const total = w.tenants.reduce((a, t) => a + w.popularity(t.index) * simTokens(t.system), 0);
  assert.ok(Math.max(...plan.share) - Math.min(...plan.share) <= largest / total + 0.05);
  const route = oracleRoute(plan, ["http://a", "http://b", "http://c", "http://d"]);
  const s = w.session(0);
  const url = route(s, w.headers(s))["x-smg-target-worker"];
  assert.equal(url, ["http://a", "http://b", "http://c", "http://d"][plan.worker[s.tenant]]);
  assert.throws(() => route(s, { "x-tenant-id": "99" }), /no worker for tenant/);
});

Deno.test("affinity: each request carries its conversation key as X-SMG-Routing-Key", () => {
  const route = affinityRoute(["b1", "b7", "b1"]);
  assert.deepEqual(route(1), { "x-smg-routing-key": "b7" });
  assert.deepEqual(route(2), route(0));
  assert.throws(() => route(3), /no conversation key for request 3/);
});

function row(target: string, point: string, hit: number, p50: number, p99: number): Summary {
  return {
    point,
    target,
    sent: 10,
    ok: 10,
    failed: 0,
    cut: 0,
    offeredRps: 1,
    rps: 1,
    outTokPerS: 1,
    ttftMeanMs: null,
    ttftP50Ms: p50,
    ttftP99Ms: p99,
    e2eP50Ms: null,
    e2eP99Ms: null,
    cacheHitRate: hit,
    clientCacheHitRate: null,
    followUpHitRate: null,
    spreadTokens: null,
    spreadRequests: null,
    spreadUncached: null,
    meanPromptTokens: null,
    workers: [],
    cpuBusyPct: [],
    errors: [],
  };
}

Deno.test("verdict: ratios to the references, targets met or not, the advantage's trend", () => {
  const rows = [
    row("ref:upper-bound", "light", 0.9, 20, 200),
    row("ref:oracle", "light", 0.85, 30, 700),
    row("smg:cache_aware", "light", 0.84, 33, 800),
    row("smg:round_robin", "light", 0.6, 66, 900),
    row("haproxy:roundrobin", "light", 0.6, 60, 850),
    row("ref:upper-bound", "heavy", 0.9, 20, 300),
    row("ref:oracle", "heavy", 0.85, 40, 1000),
    row("smg:cache_aware", "heavy", 0.8, 40, 1000),
    row("smg:round_robin", "heavy", 0.55, 160, 3000),
    row("nginx:hash-session", "heavy", 0.8, 35, 900),
  ];
  assert.deepEqual(relative(rows[2], rows), {
    hitOfUpper: 0.93,
    p50VsOracle: 1.1,
    p99VsOracle: 1.14,
  });
  const light = pointVerdict(rows, "light")!;
  assert.equal(light.hitMet, true);
  assert.equal(light.p50Met, true);
  assert.equal(light.p99Met, true);
  assert.equal(light.p99BeatsPeers, true);
  assert.equal(light.p50AdvantageRatio, 2);
  assert.equal(light.hitAdvantagePoints, 24);
  const heavy = pointVerdict(rows, "heavy")!;
  assert.equal(heavy.hitMet, false, "0.8 / 0.9 = 0.89 < 0.90");
  assert.equal(heavy.p99BeatsPeers, false, "nginx:hash-session's 900 ms is lower");
  assert.deepEqual(heavy.bestPeer, { target: "nginx:hash-session", ttftP99Ms: 900 });
  assert.deepEqual(advantageGrows(light, heavy), { p50: true, hit: true });
  assert.equal(pointVerdict(rows, "none"), null);
  const noRefs = relative(rows[2], rows.filter((r) => !r.target.startsWith("ref:")));
  assert.deepEqual(noRefs, { hitOfUpper: null, p50VsOracle: null, p99VsOracle: null });
});

Deno.test("pd bench: prompts are seeded, sized as drawn and unique from the first word", () => {
  const a = prompt("mixed", 0, 7);
  assert.deepEqual(prompt("mixed", 0, 7), a);
  assert.notEqual(prompt("mixed", 1, 7).text, a.text);
  assert.ok(a.tokens >= 64 && a.tokens <= 8192);
  assert.ok(simTokens(a.text) >= a.tokens && simTokens(a.text) <= a.tokens + 4);
  assert.ok(a.text.startsWith("r7 "));
  const sizes = Array.from({ length: 2000 }, (_, n) => prompt("two-size", 0, n).tokens);
  assert.deepEqual([...new Set(sizes)].sort((x, y) => x - y), [256, 4096]);
  const long = sizes.filter((s) => s === 4096).length / sizes.length;
  assert.ok(Math.abs(long - 0.2) < 0.03, `long share ${long}`);
  assert.deepEqual(Object.keys(SIZES), ["mixed", "two-size"]);
  assert.equal(maxOverMean([1, 1, 2]), 1.5);
  assert.equal(maxOverMean([1, 1, 1, 4], 3), 2.286);
  assert.equal(maxOverMean([0, 0]), null);
});

Deno.test("pd bench: its gateway command line is one the gateway accepts, as meant", () => {
  const args = pdGatewayArgs(
    8080,
    29000,
    [{ url: "http://127.0.0.1:31001", bootstrapPort: 8998 }],
    ["http://127.0.0.1:31002"],
    "bucket",
    7,
  );
  const flags = args.slice(args.findIndex((a) => a.endsWith("main.ts")) + 1);
  const c = parseGatewayArgs(flags);
  assert.equal(c.pd.enabled, true);
  assert.deepEqual(c.pd.prefill, [{ url: "http://127.0.0.1:31001", bootstrapPort: 8998 }]);
  assert.deepEqual(c.pd.decode, ["http://127.0.0.1:31002"]);
  assert.equal(c.pd.prefillPolicy, "bucket");
  assert.equal(c.pd.decodePolicy, "round_robin");
  assert.equal(c.port, 8080);
});
