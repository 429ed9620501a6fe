/**
 * The simulated worker's HTTP API over a real engine at time scale 0 (instant), called as a
 * handler: OpenAI chat and completions (whole and streamed, with cached-token usage), sglang's
 * /generate, prompts tokenized as the gateway does when given its tokenizer, the load endpoints,
 * flush, and the fault knobs.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { SimEngine } from "../../lib/sim/engine.ts";
import { SimServer, type SimServerOptions } from "../../lib/sim/server.ts";
import { simDeps } from "../../lib/sim/worker.ts";
import { DEFAULT_ENGINE } from "../../lib/sim/cli.ts";
import { promptOf } from "../../lib/tokenizer/prompt.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { until } from "../../support/wait.ts";

async function withServer(
  o: Partial<SimServerOptions>,
  fn: (s: SimServer, engine: SimEngine) => Promise<void>,
) {
  const engine = new SimEngine({ ...DEFAULT_ENGINE, timeScale: 0 }, simDeps(1));
  const server = new SimServer(engine, {
    model: "sim-model",
    maxNewTokens: 8,
    errorRate: 0,
    spikeRate: 0,
    spikeMs: 0,
    dieAfter: 0,
    hang: false,
    random: seededRandom(3),
    sleep: () => Promise.resolve(),
    role: "regular",
    bootstrapTimeoutMs: 1000,
    ...o,
  });
  try {
    await fn(server, engine);
  } finally {
    await engine.close();
  }
}

function post(s: SimServer, path: string, body: unknown, signal?: AbortSignal) {
  return s.handle(
    new Request(`http://sim${path}`, { method: "POST", body: JSON.stringify(body), signal }),
  );
}

const system = "You are a careful assistant. ".repeat(30);
const chat = (user: string, extra: Record<string, unknown> = {}) => ({
  model: "sim-model",
  messages: [{ role: "system", content: system }, { role: "user", content: user }],
  ...extra,
});

Deno.test("sim server: a repeated system prompt is cached and reported in usage", async () => {
  await withServer({}, async (s) => {
    const first = await (await post(s, "/v1/chat/completions", chat("first question"))).json();
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(first.usage.completion_tokens, 8);
    const second = await (await post(s, "/v1/chat/completions", chat("another question"))).json();
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(
      cached > 0.8 * first.usage.prompt_tokens * 0.9,
      `shared system prompt cached: ${cached}`,
    );
    assert.equal(second.object, "chat.completion");
    assert.equal(typeof second.choices[0].message.content, "string");
  });
});

Deno.test("sim server: a multi-turn conversation that sends the reply back hits its whole history", async () => {
  await withServer({}, async (s) => {
    const messages: { role: string; content: string }[] = [{
      role: "user",
      content: "tell me a story",
    }];
    let last = 0;
    for (let turn = 0; turn < 3; turn++) {
      const r = await (await post(s, "/v1/chat/completions", {
        model: "sim-model",
        messages,
        max_tokens: 20,
      })).json();
      if (turn > 0) {
        // Everything but the newest user message (and the block it ends in) was seen before.
        assert.ok(r.usage.prompt_tokens_details.cached_tokens >= last - 16, `turn ${turn}`);
      }
      last = r.usage.prompt_tokens;
      messages.push({ role: "assistant", content: r.choices[0].message.content });
      messages.push({ role: "user", content: `and then ${turn}?` });
    }
  });
});

Deno.test("sim server: streams OpenAI chunks, the usage chunk when asked, then [DONE]", async () => {
  await withServer({}, async (s) => {
    const res = await post(
      s,
      "/v1/chat/completions",
      chat("hi", { stream: true, stream_options: { include_usage: true } }),
    );
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const events = (await res.text()).split("\n\n").filter(Boolean).map((e) =>
      e.slice("data: ".length)
    );
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    const content = chunks.filter((c) => c.choices[0]?.delta?.content).length;
    assert.equal(content, 8);
    assert.equal(chunks.at(-2).choices[0].finish_reason, "length");
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.equal(chunks.at(-1).usage.completion_tokens, 8);
  });
});

Deno.test("sim server: completions and /generate (text or input_ids, cumulative stream text)", async () => {
  await withServer({}, async (s) => {
    const c = await (await post(s, "/v1/completions", {
      model: "sim-model",
      prompt: "hello",
      max_tokens: 4,
    })).json();
    assert.equal(c.object, "text_completion");
    assert.equal(c.usage.completion_tokens, 4);
    const g = await (await post(s, "/generate", {
      input_ids: [1, 2, 3, 4],
      sampling_params: { max_new_tokens: 3 },
    }))
      .json();
    assert.equal(g.meta_info.prompt_tokens, 4);
    assert.equal(g.meta_info.completion_tokens, 3);
    const gs = await (await post(s, "/generate", {
      text: "hi",
      stream: true,
      sampling_params: { max_new_tokens: 3 },
    }))
      .text();
    const texts = gs.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) =>
      JSON.parse(e.slice(6)).text
    );
    assert.ok(texts[1].startsWith(texts[0]) && texts[2].startsWith(texts[1]), "cumulative text");
  });
});

Deno.test("sim server: given the gateway's tokenizer, prompts are the ids the gateway routes on", async () => {
  const tok = qwen3();
  const promptTokens = (api: "chat" | "completions" | "generate", body: Record<string, unknown>) =>
    promptOf(api, body, tok).ids;
  await withServer({ promptTokens }, async (s, engine) => {
    const stored: number[] = [];
    engine.kvEvents.subscribe(0, (b) => {
      for (const e of b.events) if (e.type === "stored") stored.push(...e.tokens);
    });
    const body = chat("what is a radix tree?");
    const ids = promptOf("chat", body, tok).ids;
    const r = await (await post(s, "/v1/chat/completions", body)).json();
    assert.equal(r.usage.prompt_tokens, ids.length);
    const bs = DEFAULT_ENGINE.blockSize;
    const full = Math.floor(ids.length / bs) * bs;
    assert.deepEqual(stored.slice(0, full), ids.slice(0, full), "the engine's blocks hold them");
    // A batch's first prompt, as without the tokenizer; what the tokenizer refuses is a 400.
    const batch = await (await post(s, "/v1/completions", { prompt: ["hello", "x"] })).json();
    assert.equal(batch.usage.prompt_tokens, tok.encode("hello", true).length);
    const bad = await post(s, "/generate", { text: "" });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.message, /no tokens/);
  });
});

Deno.test("sim server: bad requests get 400 with an OpenAI error body", async () => {
  await withServer({}, async (s) => {
    for (
      const [path, body] of [
        ["/v1/chat/completions", { messages: [] }],
        ["/v1/completions", { prompt: 5 }],
        ["/generate", { sampling_params: {} }],
        ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: -1 }],
      ] as const
    ) {
      const r = await post(s, path, body);
      assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.equal((await r.json()).error.type, "invalid_request_error");
    }
  });
});

Deno.test("sim server: load endpoints and metrics agree with the engine", async () => {
  await withServer({}, async (s) => {
    await (await post(s, "/v1/chat/completions", chat("a"))).text();
    await (await post(s, "/v1/chat/completions", chat("b"))).text();
    const loads = await (await s.handle(new Request("http://sim/v1/loads"))).json();
    assert.equal(loads.loads[0].max_total_num_tokens, DEFAULT_ENGINE.kvTokens);
    // Idle: the cached prefixes are evictable, so none is in use (sglang's count).
    assert.equal(loads.loads[0].num_used_tokens, 0);
    assert.equal(loads.loads[0].token_usage, 0);
    const metrics = await (await s.handle(new Request("http://sim/metrics"))).text();
    const value = (n: string) =>
      Number(new RegExp(`^sglang:${n}\\{[^}]*\\} (\\S+)$`, "m").exec(metrics)![1]);
    assert.equal(value("num_requests_total"), 2);
    assert.ok(value("cached_tokens_total") > 0);
    assert.ok(value("prompt_tokens_total") > value("cached_tokens_total"));
    assert.equal(value("time_to_first_token_seconds_count"), 2);
    assert.ok(value("time_to_first_token_seconds_sum") > 0);
    const legacy = await (await s.handle(new Request("http://sim/get_load"))).json();
    assert.equal(legacy[0].num_reqs, 0);
    const models = await (await s.handle(new Request("http://sim/v1/models"))).json();
    assert.equal(models.data[0].id, "sim-model");
    assert.equal(models.data[0].owned_by, "sglang");
  });
});

Deno.test("sim server: flush_cache empties the prefix cache", async () => {
  await withServer({}, async (s) => {
    await (await post(s, "/v1/chat/completions", chat("a"))).text();
    const flushed = await s.handle(new Request("http://sim/flush_cache", { method: "POST" }));
    assert.equal(flushed.status, 200);
    await flushed.body?.cancel();
    const again = await (await post(s, "/v1/chat/completions", chat("a"))).json();
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, 0);
  });
});

Deno.test("sim server: --error-rate 1 answers 500s; --die-after stops answering", async () => {
  await withServer({ errorRate: 1 }, async (s) => {
    const r = await post(s, "/v1/chat/completions", chat("a"));
    assert.equal(r.status, 500);
    await r.body?.cancel();
  });
  let died = 0;
  await withServer({ dieAfter: 1, onDie: () => died++ }, async (s) => {
    assert.equal((await post(s, "/v1/chat/completions", chat("a"))).status, 200);
    const r = await post(s, "/v1/chat/completions", chat("b"));
    assert.equal(r.status, 503);
    await r.body?.cancel();
    assert.equal(died, 1);
    assert.equal(s.dead, true);
  });
});

Deno.test("sim server: --hang never answers until the client leaves", async () => {
  // The error-rate draw (never an error here) is the server's last step before it holds the
  // request: once drawn, only the client leaving (or the worker dying) ends the request.
  const held = Promise.withResolvers<void>();
  const random = () => (held.resolve(), 0.5);
  await withServer({ hang: true, errorRate: 1e-9, random }, async (s) => {
    const ac = new AbortController();
    const pending = post(s, "/v1/chat/completions", chat("a"), ac.signal);
    let settled = false;
    pending.then(() => (settled = true));
    await held.promise;
    assert.equal(settled, false);
    ac.abort();
    const r = await pending;
    await r.body?.cancel();
  });
});

Deno.test("sim server: a client leaving a stream aborts its request in the engine", async () => {
  await withServer({ maxNewTokens: 100000 }, async (s, engine) => {
    const ac = new AbortController();
    const res = await post(s, "/v1/chat/completions", chat("long", { stream: true }), ac.signal);
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    const metrics = async () => await (await s.handle(new Request("http://sim/metrics"))).text();
    const aborted = () => engine.stats().totals.aborted > 0;
    await until(aborted, (l) => engine.onFinish(l), "the engine to abort the request");
    assert.match(await metrics(), /num_aborted_requests_total\{[^}]*\} 1/);
  });
});
