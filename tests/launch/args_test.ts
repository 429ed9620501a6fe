/**
 * `smg serve` argument splitting: serve's own flags, `--router-` flags for the gateway, and the
 * rest for the engine, with the mistakes a user makes refused in one line.
 */

import assert from "node:assert/strict";
import { ConfigError } from "../../lib/core/errors.ts";
import { parseServeArgs, type ServeOptions } from "../../lib/launch/args.ts";

function parse(args: string[]): ServeOptions {
  const o = parseServeArgs(args);
  assert.notEqual(o, "help");
  return o as ServeOptions;
}

Deno.test("serve args: SMG's defaults", () => {
  const o = parse([]);
  assert.equal(o.backend, "sglang");
  assert.equal(o.host, "127.0.0.1");
  assert.equal(o.port, 8080);
  assert.equal(o.dpSize, 1);
  assert.equal(o.workerBasePort, 31000);
  assert.equal(o.startupTimeoutSecs, 300);
  assert.deepEqual(o.routerArgs, []);
  assert.deepEqual(o.engineArgs, []);
});

Deno.test("serve args: three ways — serve flags, --router- flags, engine flags verbatim", () => {
  const o = parse([
    "--backend",
    "sim",
    "--dp-size",
    "4",
    "--router-policy",
    "round_robin",
    "--time-scale",
    "0.5",
    "--router-routing-key-headers",
    "x-a",
    "x-b",
    "--port=9000",
    "--hang",
    "--model-path",
    "meta-llama/Llama-3.1-8B",
  ]);
  assert.equal(o.backend, "sim");
  assert.equal(o.dpSize, 4);
  assert.equal(o.port, 9000);
  assert.deepEqual(o.routerArgs, [
    "--policy",
    "round_robin",
    "--routing-key-headers",
    "x-a",
    "x-b",
  ]);
  assert.deepEqual(o.engineArgs, [
    "--time-scale",
    "0.5",
    "--hang",
    "--model-path",
    "meta-llama/Llama-3.1-8B",
  ]);
  assert.equal(parse(["--data-parallel-size", "2", "--runtime", "vllm"]).backend, "vllm");
});

Deno.test("serve args: bad values and flags serve decides itself are refused in one line", () => {
  const cases: [string[], RegExp][] = [
    [["--backend", "trt"], /--backend: invalid value 'trt'; allowed: sim, sglang, vllm/],
    [["--dp-size", "0"], /--dp-size: invalid value '0'; expected an integer >= 1/],
    [["--dp-size", "two"], /--dp-size/],
    [["--port"], /--port: invalid value ''; expected exactly one value/],
    [["--router-worker-urls", "http://x:1"], /--router-worker-urls is decided by serve/],
    [["--router-port", "1"], /--router-port is decided by serve/],
    [["stray"], /unexpected argument 'stray'/],
    [["--connection-mode", "grpc"], /in-process simulated workers only/],
    [["--connection-mode", "zmq"], /allowed: http, grpc/],
  ];
  for (const [args, message] of cases) {
    assert.throws(
      () => parseServeArgs(args),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
      args.join(" "),
    );
  }
  assert.equal(parseServeArgs(["--help"]), "help");
});
