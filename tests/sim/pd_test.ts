/**
 * Prefill/decode pairing between simulated workers, as the gateway will drive it: the same
 * request to both with bootstrap fields; decode waits for the prefill's room, then decodes
 * without prefilling; a room that never becomes ready fails the decode leg cleanly.
 */

import assert from "node:assert/strict";
import { bootstrapOf } from "../../lib/sim/pd.ts";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { type SimWorker, startSimWorker } from "../../lib/sim/worker.ts";

function start(args: string[]): SimWorker {
  const o = parseSimWorkerArgs(["--port", "0", "--bootstrap-port", "0", ...args]);
  assert.notEqual(o, "help");
  return startSimWorker(o as Exclude<typeof o, "help">);
}

const body = (room: number, port: number) => ({
  model: "sim-model",
  messages: [{ role: "user", content: "A long question. ".repeat(100) }],
  max_tokens: 4,
  bootstrap_host: "127.0.0.1",
  bootstrap_port: port,
  bootstrap_room: room,
});

function post(w: SimWorker, b: unknown) {
  return fetch(`${w.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(b) });
}

Deno.test("pd: decode waits for its prefill partner's room, then decodes without prefill", async () => {
  const prefill = start(["--role", "prefill", "--time-scale", "0.05"]);
  const decode = start(["--disaggregation-mode", "decode", "--time-scale", "0.05"]);
  try {
    const b = body(7, prefill.bootstrapPort!);
    const [p, d] = await Promise.all([post(prefill, b), post(decode, b)]);
    const pj = await p.json();
    const dj = await d.json();
    assert.equal(p.status, 200);
    assert.equal(pj.usage.completion_tokens, 1, "the prefill leg makes one token");
    assert.equal(d.status, 200);
    assert.equal(dj.usage.completion_tokens, 4);
    const pm = prefill.engine.stats().totals;
    const dm = decode.engine.stats().totals;
    assert.equal(pm.promptTokens, dm.promptTokens, "both legs saw the same prompt");
    assert.equal(decode.bootstrapPort, null);
  } finally {
    await Promise.all([prefill.close(), decode.close()]);
  }
});

Deno.test("pd: a room that never becomes ready fails the decode leg with a 500", async () => {
  const prefill = start(["--role", "prefill", "--time-scale", "0"]);
  const decode = start(["--role", "decode", "--bootstrap-timeout-ms", "50", "--time-scale", "0"]);
  try {
    const r = await post(decode, body(99, prefill.bootstrapPort!));
    assert.equal(r.status, 500);
    assert.match((await r.json()).error.message, /bootstrap room 99 not ready/);
  } finally {
    await Promise.all([prefill.close(), decode.close()]);
  }
});

Deno.test("pd: bootstrap fields are read from plain and batched bodies", () => {
  assert.deepEqual(bootstrapOf({ bootstrap_host: "h", bootstrap_port: 9, bootstrap_room: 5 }), {
    host: "h",
    port: 9,
    room: "5",
  });
  assert.equal(
    bootstrapOf({ bootstrap_room: [3, 4], bootstrap_host: ["a", "b"], bootstrap_port: [1, 2] })
      ?.room,
    "3",
  );
  assert.equal(bootstrapOf({}), null);
});
