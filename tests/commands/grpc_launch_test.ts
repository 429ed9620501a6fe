/**
 * The command line, as processes: `smg sim-worker --grpc-port P --model-path DIR` (a
 * simulated sglang scheduler over gRPC, its words as Qwen3 ids) and
 * `smg --policy least_load --worker-urls grpc://... --model-path DIR` in front of it, used by
 * the `openai` client; an unloadable `--model-path` fails at start with one line and exit 2.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { freePort, spawnGateway } from "../support/process.ts";
import { writeQwen3 } from "../support/qwen3.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

Deno.test("grpc launch: smg sim-worker --grpc-port behind smg --worker-urls grpc://", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-grpc-launch-" });
  await writeQwen3(`${dir}/qwen3`);
  const grpcPort = freePort();
  const worker = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-no-legacy-abort",
      "--allow-net=127.0.0.1",
      "--allow-env",
      `--allow-read=${dir}`,
      MAIN,
      "sim-worker",
      "--port",
      "0",
      "--grpc-port",
      String(grpcPort),
      "--model-path",
      `${dir}/qwen3`,
      "--time-scale",
      "0",
    ],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const log = worker.stderr.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let text = "";
    while (!text.includes("sim-worker serving gRPC")) {
      const r = await log.read();
      if (r.done) throw new Error(`sim-worker exited:\n${text}`);
      text += r.value;
    }
    const gw = await spawnGateway(
      MAIN,
      [
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        "0",
        "--policy",
        "least_load",
        "--worker-urls",
        `grpc://127.0.0.1:${grpcPort}`,
        "--model-path",
        `${dir}/qwen3`,
        "--shutdown-grace-period-secs",
        "1",
      ],
      undefined,
      [`--allow-read=${dir}`],
    );
    try {
      await gw.waitForOutput(/msg="worker ready"/);
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const c = await client.chat.completions.create({
        model: "sim-model",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 5,
      });
      assert.match(c.choices[0].message.content ?? "", /^[a-z]+( [a-z]+)* ?$/);
      assert.equal(c.usage?.completion_tokens, 5);
    } finally {
      gw.child.kill("SIGTERM");
      assert.equal(await gw.exited, 0);
    }
  } finally {
    worker.kill("SIGTERM");
    await log.cancel();
    assert.equal((await worker.status).code, 0);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("grpc launch: an unloadable --model-path fails at start with one line and exit 2", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-grpc-bad-" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--unstable-no-legacy-abort",
        "--allow-net",
        "--allow-env",
        `--allow-read=${dir}`,
        MAIN,
        "--worker-urls",
        "grpc://127.0.0.1:1",
        "--model-path",
        dir,
      ],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const err = new TextDecoder().decode(out.stderr).trim();
    assert.equal(out.code, 2, err);
    assert.equal(err.split("\n").length, 1, err);
    assert.match(err, /has no tokenizer\.json/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
