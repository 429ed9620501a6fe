/**
 * `smg sim-worker` as a process with docs/routing.md's KV-event flags: `--kv-events-port`,
 * `--kv-events-replay-port` and `--model-path` log the endpoints to label the worker with, and a
 * chat sent to it comes out of its PUB as the gateway's subscriber decodes it, its blocks holding
 * the ids the gateway's tokenizer gives the prompt; the replay ROUTER answers too. Bad port flags
 * fail at parse time.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import type { KvEventBatch } from "../../lib/kv/events.ts";
import { requestReplay } from "../../lib/kv/replay.ts";
import { dialZmtp, ZmqSubscriber } from "../../lib/kv/zmq_subscriber.ts";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { spawnSimWorker } from "../../support/gateway_process.ts";
import { qwen3, writeQwen3 } from "../../support/qwen3.ts";
import { Waiters } from "../../support/wait.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** `smg sim-worker` with `args`; resolves with its log fields once it publishes KV events. */
async function simWorker(dir: string, args: string[]) {
  const w = await spawnSimWorker(MAIN, dir, args, "sim-worker publishing KV events");
  const field = (name: string) => w.log.match(new RegExp(`${name}=(\\S+)`))?.[1] ?? "";
  return {
    url: field("addr"),
    kvEvents: field("kv_events"),
    kvEventsReplay: field("kv_events_replay"),
    stop: w.stop,
  };
}

Deno.test("sim-worker: --kv-events-port publishes its cache's blocks as the gateway's tokenizer reads the prompt", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-sim-kv-" });
  await writeQwen3(`${dir}/qwen3`);
  const w = await simWorker(dir, [
    "--port",
    "0",
    "--kv-events-port",
    "0",
    "--kv-events-replay-port",
    "0",
    "--model-path",
    `${dir}/qwen3`,
    "--time-scale",
    "0",
  ]);
  const batches: KvEventBatch[] = [];
  const changed = new Waiters();
  const sub = new ZmqSubscriber({
    endpoint: w.kvEvents,
    heartbeatIntervalMs: 0,
    clock: systemClock,
  }, {
    onBatch: (b) => (batches.push(b), changed.poke()),
    onStatus: changed.poke,
  });
  try {
    assert.match(w.kvEvents, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    sub.start();
    await changed.wait(() => sub.connected, "the subscription");
    const tok = qwen3();
    const sent: number[][] = [];
    // The subscription reaches the PUB a moment after the connection: ask (a new prompt each
    // time, so each one stores blocks) until a batch comes.
    for (let i = 0; batches.length === 0 && i < 50; i++) {
      const content = `${i}: explain prefix caching in a few words `.repeat(8);
      const ids = tok.encode(tok.applyChatTemplate([{ role: "user", content }]), false);
      sent.push(ids);
      const r = await fetch(`${w.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content }], max_tokens: 1 }),
      });
      assert.equal((await r.json()).usage.prompt_tokens, ids.length);
      await changed.wait(() => batches.length > 0, "a batch", 100).catch(() => {});
    }
    const stored = batches.flatMap((b) => b.events).find((e) => e.kind === "stored");
    assert.ok(stored && stored.kind === "stored" && stored.parentHash === null);
    const tokens = stored.blocks.flatMap((b) => b.tokenIds);
    assert.ok(tokens.length >= 16);
    assert.ok(
      sent.some((ids) => tokens.every((t, j) => ids[j] === t)),
      "a prompt's leading blocks, in the gateway tokenizer's ids",
    );
    const replayed = await requestReplay({
      dial: dialZmtp,
      endpoint: w.kvEventsReplay,
      from: 1,
      to: batches[0].seq,
      timeoutMs: 5000,
      clock: systemClock,
    });
    assert.equal(replayed.at(-1)?.[0], batches[0].seq);
  } finally {
    await sub.close();
    await w.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sim-worker: KV-event port flags are checked at start", () => {
  const o = parseSimWorkerArgs(["--kv-events-port", "5557", "--kv-events-replay-port", "0"]);
  assert.ok(o !== "help");
  assert.deepEqual([o.kvEventsPort, o.kvEventsReplayPort], [5557, 0]);
  assert.throws(() => parseSimWorkerArgs(["--kv-events-replay-port", "5558"]), /only with/);
  assert.throws(() => parseSimWorkerArgs(["--kv-events-port", "70000"]), /port 0..65535/);
  const plain = parseSimWorkerArgs(["--model-path", "/m"]);
  assert.ok(plain !== "help");
  assert.deepEqual([plain.kvEventsPort, plain.grpcPort, plain.modelPath], [null, null, "/m"]);
});
