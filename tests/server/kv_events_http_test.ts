/**
 * KV-event mode with HTTP workers through the real gateway: simulated workers given the
 * gateway's tokenizer publish their caches' events over ZeroMQ (`--kv-events-port`, with a
 * replay ROUTER), as vLLM and SGLang do; registered with the `kv_events` and `kv_events_replay`
 * labels, each is subscribed once its model is known; a repeated prompt is routed to the worker
 * the index says holds it, and the worker's own usage confirms the prediction. Without a
 * tokenizer the gateway subscribes to nothing. The gRPC version is kv_events_test.ts.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { DEFAULT_ENGINE } from "../../lib/sim/cli.ts";
import { type SimWorker, startSimWorker } from "../../lib/sim/worker.ts";
import { promptOf } from "../../lib/tokenizer/prompt.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { until, within } from "../../support/wait.ts";
import { NO_FAULTS } from "../../support/sim_engine.ts";

const MODEL = "qwen3-sim";

/** An HTTP simulated worker tokenizing as the gateway does and publishing its KV events. */
function simWorker(seed: number): SimWorker {
  const tok = qwen3();
  return startSimWorker({
    host: "127.0.0.1",
    port: 0,
    seed,
    bootstrapPort: 0,
    engine: { ...DEFAULT_ENGINE, decodeBaseMs: 0.2, prefillTps: 1e9 },
    server: {
      model: MODEL,
      maxNewTokens: 8,
      ...NO_FAULTS,
      promptTokens: (api, body) => promptOf(api, body, tok).ids,
    },
    kvEventsPort: 0,
    kvEventsReplayPort: 0,
  });
}

/** A gateway (with a tokenizer, or not) and `n` workers registered with their KV-event labels. */
async function withFleet(
  n: number,
  fn: (g: TestGateway, ws: SimWorker[]) => Promise<void>,
  tokenizer = true,
) {
  const ws = Array.from({ length: n }, (_, i) => simWorker(i + 1));
  let g: TestGateway | null = null;
  try {
    const gw = await startGateway([], {
      modelPath: tokenizer ? "qwen3" : null,
      policy: "cache_aware",
      cacheAware: { ...defaultConfig().cacheAware, kvEvents: "auto" },
    }, tokenizer ? { grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) } } : {});
    g = gw;
    for (const w of ws) {
      const r = await fetch(`${gw.url}/workers`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          url: w.url,
          labels: {
            kv_events: w.kvEvents!.endpoint,
            kv_events_replay: w.kvEvents!.replayEndpoint!,
          },
        }),
      });
      assert.equal(r.status, 202, await r.text());
    }
    await within(gw.ready(n), `${n} workers ready`);
    await fn(gw, ws);
  } finally {
    await g?.close();
    for (const w of ws) await w.close();
  }
}

const chat = async (g: TestGateway, content: string) => {
  const r = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 2 }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  return {
    worker: r.headers.get("x-smg-routed-worker-id")!,
    cached: j.usage.prompt_tokens_details.cached_tokens as number,
  };
};

/** Resolves once each worker's PUB has a subscriber. */
function subscribed(ws: SimWorker[]): Promise<unknown> {
  return Promise.all(ws.map((w) => {
    const pub = w.kvEvents!.pub;
    return until(() => pub.subscribers === 1, (l) => pub.watch(l), `${w.url} subscribed`);
  }));
}

const LONG = "tell me about the history of the radix tree and its uses in caching ".repeat(12);

/** The ids the gateway routes a one-message chat on. */
function promptIds(content: string): number[] {
  const tok = qwen3();
  return tok.encode(tok.applyChatTemplate([{ role: "user", content }]), false);
}

/** The prompt's tokens a worker holding all of it serves from cache (all full blocks but the last token's). */
const cachedOf = (ids: number[]) =>
  Math.floor((ids.length - 1) / DEFAULT_ENGINE.blockSize) * DEFAULT_ENGINE.blockSize;

Deno.test("kv events over zmq: the gateway subscribes to each labelled HTTP worker and routes a repeat on what it holds", async () => {
  await withFleet(3, async (g, ws) => {
    await subscribed(ws);
    const kv = g.gw.kv!;
    assert.equal(kv.monitor.size, 3);
    const first = await chat(g, LONG);
    assert.equal(first.cached, 0);
    const index = () => kv.monitor.index(MODEL);
    await until(() => (index()?.size ?? 0) > 0, (l) => kv.monitor.subscribe(l), "the index");
    const holder = g.gw.registry.get(first.worker)!.url;
    const prompt = promptIds(LONG);
    const held = index()!.match(prompt);
    // The worker's events carry the gateway's own token ids: the whole prompt's full blocks.
    assert.deepEqual([...held.entries()], [[holder, cachedOf(prompt)]]);
    // The repeat goes where the blocks are, and the worker confirms it found them.
    for (let i = 0; i < 3; i++) {
      const again = await chat(g, LONG);
      assert.equal(again.worker, first.worker);
      assert.equal(again.cached, held.get(holder));
    }
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, new RegExp(`^smg_kv_index_blocks\\{model="${MODEL}"\\} [1-9]`, "m"));
    assert.match(metrics, /^smg_kv_event_batches_total\{worker="http:[^"]+"\} [1-9]/m);
    assert.doesNotMatch(metrics, /^smg_kv_event_subscription_failures_total\{/m);
  });
});

Deno.test("kv events over zmq: prompts a worker cached behind the gateway's back are routed to it", async () => {
  await withFleet(3, async (g, ws) => {
    await subscribed(ws);
    const kv = g.gw.kv!;
    const index = () => kv.monitor.index(MODEL);
    // Each prompt prefilled on its own worker directly: the gateway's tree never saw them, only
    // the workers' events tell where they are.
    const prompts = [1, 2].map((i) => `question ${i}: ${LONG}`);
    for (const [i, content] of prompts.entries()) {
      const r = await fetch(`${ws[i + 1].url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content }],
          max_tokens: 1,
        }),
      });
      assert.equal(r.status, 200);
      await r.body?.cancel();
    }
    const heldBy = (content: string) => [...(index()?.match(promptIds(content)).keys() ?? [])];
    await until(
      () => prompts.every((p, i) => heldBy(p).includes(ws[i + 1].url)),
      (l) => kv.monitor.subscribe(l),
      "both prompts in the index",
    );
    for (const [i, content] of prompts.entries()) {
      const r = await chat(g, content);
      assert.equal(g.gw.registry.get(r.worker)!.url, ws[i + 1].url, `prompt ${i + 1}`);
      assert.equal(r.cached, cachedOf(promptIds(content)));
    }
  });
});

Deno.test("kv events over zmq: without a tokenizer the gateway subscribes to no HTTP worker", async () => {
  await withFleet(1, async (g, ws) => {
    assert.equal(g.gw.kv!.monitor.size, 0);
    await chat(g, LONG);
    assert.equal(ws[0].kvEvents!.pub.subscribers, 0);
  }, false);
});
