/**
 * `smg serve --backend sim --connection-mode grpc`: simulated workers speaking sglang's scheduler
 * gRPC service in-process, the gateway tokenizing with the bundled Qwen3 tokenizer; a chat
 * request through it comes back with words and usage. Bad combinations fail at start.
 */

import assert from "node:assert/strict";
import { parseServeArgs } from "../../lib/launch/args.ts";
import { ConfigError } from "../../lib/core/errors.ts";
import { simGrpcServeCommand } from "../../support/gateway_process.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("serve: --connection-mode grpc serves chat through simulated gRPC workers", async () => {
  const port = 31_800 + Math.floor(Math.random() * 100);
  const [cmd, ...args] = simGrpcServeCommand(`${ROOT}main.ts`, port, 2, [
    "--router-shutdown-grace-period-secs",
    "1",
    "--router-prometheus-host",
    "127.0.0.1",
    "--router-prometheus-port",
    "0",
  ]);
  const child = new Deno.Command(cmd, {
    args,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("smg is ready")) {
      const r = await reader.read();
      if (r.done) break;
      out += r.value;
    }
    assert.match(out, /smg is ready .* 2 simulated workers/);
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "sim-model",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 6,
      }),
    });
    const json = await res.json();
    assert.equal(res.status, 200);
    assert.match(json.choices[0].message.content, /^[a-z]+( [a-z]+)* ?$/);
    assert.equal(json.usage.completion_tokens, 6);
    await reader.cancel();
  } finally {
    child.kill("SIGTERM");
    const [status, err] = await Promise.all([
      child.status,
      new Response(child.stderr).text(),
    ]);
    assert.equal(status.code, 0, err.slice(-2000));
    // Prompts were encoded by a tokenizer thread started from main.ts, not here on failure.
    assert.doesNotMatch(err, /tokenizer thread failed/);
  }
});

Deno.test("serve: --connection-mode grpc only with in-process simulated workers", () => {
  for (const args of [["--backend", "sglang"], ["--backend", "sim", "--sim-processes"]]) {
    assert.throws(
      () => parseServeArgs([...args, "--connection-mode", "grpc"]),
      (e: unknown) =>
        e instanceof ConfigError && /in-process simulated workers only/.test(e.message),
    );
  }
  assert.throws(() => parseServeArgs(["--connection-mode", "zmq"]), /allowed: http, grpc/);
});
