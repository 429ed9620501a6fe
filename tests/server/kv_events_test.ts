/**
 * KV-event mode through the real gateway: simulated sglang schedulers publish their caches'
 * events over `SubscribeKvEvents`; the gateway subscribes to each once its model is known,
 * indexes what they report, routes a repeated prompt to the worker holding it with the index's
 * prediction (confirmed by the worker's own usage), and drops a worker's entries when it is
 * removed. `--kv-events off` subscribes to nothing.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import type { SimEngine } from "../../lib/sim/engine.ts";
import type { SimGrpcServer } from "../../lib/sim/grpc_server.ts";

import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { grpcSim } from "../support/grpc_sim.ts";
import { until, within } from "../../support/wait.ts";

interface SimWorker {
  engine: SimEngine;
  server: SimGrpcServer;
  url: string;
  subscribed: Promise<void>;
}

async function simWorker(): Promise<SimWorker> {
  const sim = await grpcSim();
  const subscribed = Promise.withResolvers<void>();
  sim.server.onKvSubscribe = subscribed.resolve;
  return { engine: sim.engine, server: sim.server, url: sim.url, subscribed: subscribed.promise };
}

async function withFleet(
  n: number,
  fn: (g: TestGateway, ws: SimWorker[]) => Promise<void>,
  kvEvents: "auto" | "off" = "auto",
) {
  const ws: SimWorker[] = [];
  for (let i = 0; i < n; i++) ws.push(await simWorker());
  const g = await startGateway(ws.map((w) => w.url), {
    modelPath: "qwen3",
    policy: "cache_aware",
    cacheAware: { ...defaultConfig().cacheAware, kvEvents },
  }, { grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) } });
  try {
    await fn(g, ws);
  } finally {
    await g.close();
    for (const w of ws) {
      await w.server.close();
      await w.engine.close();
    }
  }
}

const chat = async (g: TestGateway, content: string) => {
  const r = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "qwen3-sim",
      messages: [{ role: "user", content }],
      max_tokens: 2,
    }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  return {
    worker: r.headers.get("x-smg-routed-worker-id")!,
    cached: j.usage.prompt_tokens_details.cached_tokens as number,
  };
};

const LONG = "tell me about the history of the radix tree and its uses in caching ".repeat(12);

Deno.test("kv events: the gateway subscribes to each gRPC worker and routes a repeat on what it holds", async () => {
  await withFleet(3, async (g, ws) => {
    await within(Promise.all(ws.map((w) => w.subscribed)), "every worker subscribed");
    const kv = g.gw.kv!;
    assert.equal(kv.monitor.size, 3);
    const first = await chat(g, LONG);
    assert.equal(first.cached, 0);
    const index = () => kv.monitor.index("qwen3-sim");
    await until(() => (index()?.size ?? 0) > 0, (l) => kv.monitor.subscribe(l), "the index");
    const holder = g.gw.registry.get(first.worker)!.url;
    const prompt = qwen3().encode(
      qwen3().applyChatTemplate([{ role: "user", content: LONG }]),
      false,
    );
    const held = index()!.match(prompt);
    assert.deepEqual([...held.keys()], [holder], "only the worker that prefilled it");
    // The repeat goes where the blocks are, and the worker confirms it found them.
    const second = await chat(g, LONG);
    assert.equal(second.worker, first.worker);
    assert.equal(second.cached, held.get(holder));
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, /^smg_kv_index_blocks\{model="qwen3-sim"\} [1-9]/m);
    assert.match(metrics, /^smg_kv_event_batches_total\{worker="grpc:[^"]+"\} [1-9]/m);
    // A removed worker leaves the index at once.
    const r = await fetch(`${g.url}/workers/${first.worker}`, { method: "DELETE" });
    assert.ok(r.status < 300, await r.text());
    await until(() => !kv.monitor.has(holder), (l) => g.gw.registry.subscribe(l), "detached");
    assert.equal(index()!.match(prompt).size, 0);
  });
});

Deno.test("kv events: --kv-events off subscribes to nothing", async () => {
  await withFleet(1, async (g) => {
    assert.equal(g.gw.kv, null);
    await chat(g, LONG);
  }, "off");
});
