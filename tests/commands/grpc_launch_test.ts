/**
 * The gRPC command lines of docs/operations.md, as processes:
 * `smg sim-worker --grpc-port P --model-path DIR` (a simulated sglang scheduler over gRPC, its
 * words as Qwen3 ids) and
 * `smg --policy least_load --worker-urls grpc://... --model-path DIR` in front of it, used by
 * the `openai` client; the same with a prefill and a decode worker (`--pd-disaggregation`); an
 * unloadable `--model-path` fails at start with one line and exit 2.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import {
  gatewayListenArgs,
  ownModulesRead,
  spawnGateway,
  spawnSimWorker,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { writeQwen3 } from "../../support/qwen3.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** `smg sim-worker --grpc-port P --model-path DIR [extra]`, resolved once it serves gRPC. */
function simWorker(dir: string, grpcPort: number, extra: string[] = []) {
  const args = ["--port", "0", "--grpc-port", String(grpcPort), "--model-path", `${dir}/qwen3`];
  return spawnSimWorker(
    MAIN,
    dir,
    [...args, "--time-scale", "0", ...extra],
    "sim-worker serving gRPC",
  );
}

/** The gateway with `args` in front of workers, asked one chat by the openai client. */
async function chatThrough(dir: string, args: string[], readyWorkers: number) {
  const gw = await spawnGateway(
    MAIN,
    [
      ...gatewayListenArgs(),
      ...args,
      "--model-path",
      `${dir}/qwen3`,
      "--shutdown-grace-period-secs",
      "1",
    ],
    undefined,
    [`--allow-read=${dir}`],
  );
  try {
    // Each wait starts after the previous match: every worker's own "ready" line.
    for (let i = 0, from = 0; i < readyWorkers; i++) {
      const m = await gw.waitForOutput(/msg="worker ready"/, from);
      from += m.index + m[0].length;
    }
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
}

Deno.test("grpc launch: smg sim-worker --grpc-port behind smg --worker-urls grpc://", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-grpc-launch-" });
  await writeQwen3(`${dir}/qwen3`);
  const grpcPort = freePort();
  const worker = await simWorker(dir, grpcPort);
  try {
    await chatThrough(dir, [
      "--policy",
      "least_load",
      "--worker-urls",
      `grpc://127.0.0.1:${grpcPort}`,
    ], 1);
  } finally {
    await worker.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("grpc launch: PD over gRPC: --prefill grpc://... BOOTSTRAP_PORT --decode grpc://...", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-grpc-pd-" });
  await writeQwen3(`${dir}/qwen3`);
  const [pPort, bootPort, dPort] = [freePort(), freePort(), freePort()];
  const prefill = await simWorker(dir, pPort, [
    "--role",
    "prefill",
    "--bootstrap-port",
    String(bootPort),
  ]);
  const decode = await simWorker(dir, dPort, ["--role", "decode"]);
  try {
    await chatThrough(dir, [
      "--pd-disaggregation",
      "--prefill",
      `grpc://127.0.0.1:${pPort}`,
      String(bootPort),
      "--decode",
      `grpc://127.0.0.1:${dPort}`,
    ], 2);
  } finally {
    await Promise.all([prefill.stop(), decode.stop()]);
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
        "--unstable-worker-options",
        "--allow-net",
        "--allow-env",
        `--allow-read=${dir},${ownModulesRead(MAIN).slice("--allow-read=".length)}`,
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
