/**
 * PD disaggregation through the real gateway: simulated prefill and decode workers paired per
 * request (streaming and not), bootstrap fields present and the same on both legs (arrays for
 * batches), a failing prefill or decode worker costing a retry on another pair, the other leg
 * freed, and readiness needing both pools.
 */

import assert from "node:assert/strict";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { type SimWorker, startSimWorker } from "../../lib/sim/worker.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { within } from "../../support/wait.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";

function sim(role: "prefill" | "decode"): SimWorker {
  const o = parseSimWorkerArgs([
    "--port",
    "0",
    "--bootstrap-port",
    "0",
    "--role",
    role,
    "--time-scale",
    "0",
    "--bootstrap-timeout-ms",
    "2000",
  ]);
  return startSimWorker(o as Exclude<typeof o, "help">);
}

function pdGateway(prefill: { url: string; bootstrapPort: number | null }[], decode: string[]) {
  return startGateway([], {
    pd: {
      enabled: true,
      prefill,
      decode,
      prefillPolicy: "round_robin",
      decodePolicy: "round_robin",
    },
  });
}

async function ready(g: TestGateway, n: number) {
  await g.gw.whenReady(n);
}

const chat = {
  model: "sim-model",
  messages: [{ role: "user", content: "Explain disaggregated serving. ".repeat(20) }],
  max_tokens: 5,
};

function post(g: TestGateway, path: string, body: unknown) {
  return fetch(g.url + path, { method: "POST", body: JSON.stringify(body) });
}

Deno.test("pd: simulated prefill and decode serve chat, whole and streamed", async () => {
  const p = sim("prefill");
  const d = sim("decode");
  const g = await pdGateway([{ url: p.url, bootstrapPort: p.bootstrapPort }], [d.url]);
  try {
    await ready(g, 2);
    const r = await post(g, "/v1/chat/completions", chat);
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.usage.completion_tokens, 5, "the decode leg's answer");
    assert.equal(r.headers.get("x-smg-routed-worker-id"), g.gw.registry.byUrl(d.url)!.id);
    const s = await post(g, "/v1/chat/completions", { ...chat, stream: true });
    const text = await s.text();
    assert.match(text, /data: \[DONE\]/);
    assert.equal(p.engine.stats().totals.requests, 2, "the prefill leg ran both");
    assert.equal(d.engine.stats().totals.requests, 2);
    for (const w of g.gw.registry.all()) assert.equal(w.inFlight, 0);
    const workers = await (await fetch(`${g.url}/workers`)).json();
    assert.deepEqual(workers.stats, { prefill_count: 1, decode_count: 1, regular_count: 0 });
  } finally {
    await g.close();
    await Promise.all([p.close(), d.close()]);
  }
});

Deno.test("pd: both legs get the same bootstrap fields; batches get arrays with fresh rooms", async () => {
  const p = new FakeWorker();
  const d = new FakeWorker();
  const g = await pdGateway([{ url: p.url, bootstrapPort: 9001 }], [d.url]);
  try {
    await ready(g, 2);
    await (await post(g, "/generate", { text: "hi", model: "test-model" })).text();
    const pb = p.seen.lastBody as Record<string, unknown>;
    const db = d.seen.lastBody as Record<string, unknown>;
    assert.equal(pb.bootstrap_host, "127.0.0.1");
    assert.equal(pb.bootstrap_port, 9001);
    assert.equal(typeof pb.bootstrap_room, "number");
    assert.deepEqual(pb, db, "the same body on both legs");
    await (await post(g, "/generate", { text: ["a", "b", "c"], model: "test-model" })).text();
    const batch = d.seen.lastBody as Record<string, number[]>;
    assert.equal(batch.bootstrap_room.length, 3);
    assert.equal(new Set(batch.bootstrap_room).size, 3, "a fresh room per element");
    assert.deepEqual(batch.bootstrap_port, [9001, 9001, 9001]);
    assert.deepEqual(
      (p.seen.lastBody as Record<string, number[]>).bootstrap_room,
      batch.bootstrap_room,
    );
  } finally {
    await g.close();
    await Promise.all([p.close(), d.close()]);
  }
});

Deno.test("pd: a failing prefill or decode worker costs a retry on another pair", async () => {
  const badP = new FakeWorker({ mode: { kind: "status", status: 500 } });
  const goodP = new FakeWorker();
  const badD = new FakeWorker({ mode: { kind: "die_before_body" } });
  const goodD = new FakeWorker();
  const g = await pdGateway(
    [{ url: badP.url, bootstrapPort: null }, { url: goodP.url, bootstrapPort: null }],
    [badD.url, goodD.url],
  );
  try {
    await ready(g, 4);
    for (let i = 0; i < 4; i++) {
      const r = await post(g, "/v1/chat/completions", {
        ...chat,
        model: "test-model",
        stream: true,
      });
      assert.equal(r.status, 200, `request ${i}`);
      assert.match(await r.text(), /\[DONE\]/);
    }
    for (const w of g.gw.registry.all()) assert.equal(w.inFlight, 0, `${w.url} freed`);
  } finally {
    await g.close();
    await Promise.all([badP, goodP, badD, goodD].map((w) => w.close()));
  }
});

Deno.test("pd: with only failing workers the client gets a clear error and both legs are freed", async () => {
  const p = new FakeWorker({ mode: { kind: "status", status: 503 } });
  const d = new FakeWorker();
  const g = await pdGateway([{ url: p.url, bootstrapPort: null }], [d.url]);
  try {
    await ready(g, 2);
    const r = await post(g, "/v1/chat/completions", { ...chat, model: "test-model" });
    assert.equal(r.status, 503);
    await r.body?.cancel();
    for (const w of g.gw.registry.all()) assert.equal(w.inFlight, 0);
    // Decode down: readiness needs both pools.
    g.gw.registry.byUrl(d.url)!.setStatus("not_ready");
    const ready2 = await fetch(`${g.url}/readiness`);
    assert.equal(ready2.status, 503);
    await ready2.body?.cancel();
    const r2 = await post(g, "/v1/chat/completions", { ...chat, model: "test-model" });
    assert.equal(r2.status, 503);
    assert.equal((await r2.json()).error.code, "server_selection_failed");
  } finally {
    await g.close();
    await Promise.all([p.close(), d.close()]);
  }
});

Deno.test("pd: a prefill stream that never ends keeps its slot until the request timeout, then is cut unblamed", async () => {
  const p = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 1 } });
  const d = new FakeWorker();
  const g = await startGateway([], {
    requestTimeoutSecs: 1,
    pd: {
      enabled: true,
      prefill: [{ url: p.url, bootstrapPort: null }],
      decode: [d.url],
      prefillPolicy: "round_robin",
      decodePolicy: "round_robin",
    },
  });
  try {
    await ready(g, 2);
    const r = await post(g, "/v1/chat/completions", { ...chat, model: "test-model", stream: true });
    assert.equal(r.status, 200);
    assert.match(await r.text(), /\[DONE\]/, "the client got the decode leg's whole answer");
    const pw = g.gw.registry.byUrl(p.url)!;
    assert.equal(pw.inFlight, 1, "the prefill is still being drained");
    await within(pw.idle(), "the prefill cut by the request timeout", 5000);
    assert.equal(pw.breaker.consecutiveFailures, 0, "a cut drain is not the worker's failure");
  } finally {
    await g.close();
    await Promise.all([p.close(), d.close()]);
  }
});
