/**
 * The worker commands `smg serve` runs per data-parallel rank: sglang and vLLM get the engine
 * flags verbatim plus host and port, and each rank its slice of GPUs by tensor-parallel size;
 * simulated children run `smg sim-worker` with a per-rank seed.
 */

import assert from "node:assert/strict";
import { parseServeArgs, type ServeOptions } from "../../lib/launch/args.ts";
import { childSpec } from "../../lib/launch/workers.ts";

function opts(args: string[]): ServeOptions {
  return parseServeArgs(args) as ServeOptions;
}

Deno.test("serve launch: sglang per rank with host, port and CUDA_VISIBLE_DEVICES by --tp-size", () => {
  const o = opts(["--backend", "sglang", "--dp-size", "2", "--model-path", "m", "--tp-size", "2"]);
  const r1 = childSpec(o, 1);
  assert.equal(r1.cmd, "python3");
  assert.deepEqual(r1.args, [
    "-m",
    "sglang.launch_server",
    "--model-path",
    "m",
    "--tp-size",
    "2",
    "--host",
    "127.0.0.1",
    "--port",
    "31001",
  ]);
  assert.equal(r1.env?.CUDA_VISIBLE_DEVICES, "2,3");
  assert.equal(r1.url, "http://127.0.0.1:31001");
  assert.equal(childSpec(o, 0).env?.CUDA_VISIBLE_DEVICES, "0,1");
});

Deno.test("serve launch: vllm serve with the engine flags; one GPU per rank by default", () => {
  const r = childSpec(
    opts(["--backend", "vllm", "--model", "m", "--worker-base-port", "40000"]),
    3,
  );
  assert.equal(r.cmd, "vllm");
  assert.deepEqual(r.args, ["serve", "--model", "m", "--host", "127.0.0.1", "--port", "40003"]);
  assert.equal(r.env?.CUDA_VISIBLE_DEVICES, "3");
});

Deno.test("serve launch: simulated children run sim-worker with the engine flags and a per-rank seed", () => {
  const r = childSpec(opts(["--backend", "sim", "--sim-processes", "--time-scale", "0.1"]), 2);
  assert.equal(r.cmd, Deno.execPath());
  const i = r.args.indexOf("sim-worker");
  assert.ok(i > 0);
  assert.deepEqual(r.args.slice(i + 1), [
    "--time-scale",
    "0.1",
    "--host",
    "127.0.0.1",
    "--port",
    "31002",
    "--seed",
    "2",
  ]);
});
