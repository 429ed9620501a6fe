/**
 * The routing benchmark's command line: trace flags and defaults, connection modes, and
 * `--chars-per-token` (passed to the workers; a bad value exits 2).
 */

import assert from "node:assert/strict";
import { parseOptions } from "./options.ts";
import { TRACE_SCENARIOS } from "./scenarios.ts";

Deno.test("options: --trace replays at each --speed, with the trace scenario's fleet", () => {
  const o = parseOptions([
    "--",
    "--trace",
    "/data/t.jsonl",
    "--speed",
    "2.5,5",
    "--trace-warmup=100",
    "--max-requests",
    "300",
  ]);
  assert.deepEqual(o.trace, { path: "/data/t.jsonl", warmup: 100 });
  assert.deepEqual(o.points.map((p) => p.load), [{ speed: 2.5 }, { speed: 5 }]);
  assert.equal(o.requests, 300);
  assert.equal(o.scenario, "trace");
  assert.equal(o.workers, 8);
  assert.deepEqual(o.simArgs, TRACE_SCENARIOS.trace.simArgs);
});

Deno.test("options: trace defaults, the small-KV trace scenario, and --sim after it", () => {
  const o = parseOptions(["--trace=/t", "--scenario", "trace-small-kv", "--sim", "--kv-tokens 1"]);
  assert.deepEqual(o.trace, { path: "/t", warmup: 400 });
  assert.deepEqual(o.points.map((p) => p.load), [{ speed: 2.5 }]);
  assert.deepEqual(o.simArgs, [...TRACE_SCENARIOS["trace-small-kv"].simArgs, "--kv-tokens", "1"]);
  assert.equal(o.duration, 10);
});

Deno.test("options: without --trace the synthetic workload's points are as before", () => {
  const o = parseOptions(["--scenario", "small-kv", "--concurrency", "8"]);
  assert.equal(o.trace, null);
  assert.deepEqual(o.points, [{ label: "closed loop 8 users", load: { concurrency: 8 } }]);
  assert.deepEqual(parseOptions([]).points.map((p) => p.label), [
    "light, open loop 5 req/s",
    "near saturation, open loop 14 req/s",
  ]);
});

Deno.test("options: --connection-mode http (default), grpc, or http-kv", () => {
  assert.equal(parseOptions([]).connectionMode, "http");
  assert.equal(parseOptions(["--connection-mode", "grpc"]).connectionMode, "grpc");
  assert.equal(parseOptions(["--connection-mode=http-kv"]).connectionMode, "http-kv");
});

Deno.test("options: --chars-per-token N reaches every worker's flags, after --sim", () => {
  assert.equal(parseOptions([]).charsPerToken, null);
  const o = parseOptions(["--chars-per-token", "8", "--sim", "--kv-tokens 1"]);
  assert.equal(o.charsPerToken, 8);
  assert.deepEqual(o.simArgs.slice(-4), ["--kv-tokens", "1", "--chars-per-token", "8"]);
  const t = parseOptions(["--trace", "/t", "--chars-per-token=2.5"]);
  assert.deepEqual(t.simArgs, [...TRACE_SCENARIOS.trace.simArgs, "--chars-per-token", "2.5"]);
});

Deno.test("options: a bad --chars-per-token, one in --sim, or one with grpc exits 2", async () => {
  const run = new URL("./run.ts", import.meta.url).pathname;
  const cases: [string[], RegExp][] = [
    [["--chars-per-token", "0.5"], /--chars-per-token needs a number in 1..1024, got 0.5/],
    [["--sim", "--chars-per-token 8"], /give --chars-per-token N, not in --sim/],
    [["--chars-per-token", "8", "--connection-mode", "grpc"], /--chars-per-token is HTTP only/],
  ];
  for (const [args, message] of cases) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-read", run, ...args],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert.equal(out.code, 2, args.join(" "));
    assert.match(new TextDecoder().decode(out.stderr).split("\n")[0], message);
  }
});
