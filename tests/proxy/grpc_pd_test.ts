/**
 * PD disaggregation over gRPC workers through the real gateway: simulated sglang schedulers in
 * the prefill and decode roles (`SimGrpcServer` with bootstrap rooms), driven by the `openai`
 * client. Both legs get the same `Generate` with `DisaggregatedParams` (the prefill's host and
 * bootstrap port, a fresh room); the prefill computes the prompt and one token, the decode waits
 * for the room and answers the client; a leg failing before its first message costs a retry on
 * another pair without blaming the other leg; a fleet mixing protocols is refused at start.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import type { GenerateRequestPb } from "../../lib/grpc/sglang_proto.ts";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";
import type { SimEngine } from "../../lib/sim/engine.ts";
import type { SimGrpcOptions, SimGrpcServer } from "../../lib/sim/grpc_server.ts";
import { BootstrapRooms } from "../../lib/sim/pd.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { grpcSim } from "../support/grpc_sim.ts";

interface Leg {
  engine: SimEngine;
  server: SimGrpcServer;
  rooms?: BootstrapRooms;
  url: string;
  /** Every `Generate` request it received. */
  seen: GenerateRequestPb[];
}

async function leg(role: "prefill" | "decode", o: Partial<SimGrpcOptions> = {}): Promise<Leg> {
  const rooms = role === "prefill" ? new BootstrapRooms("127.0.0.1", 0) : undefined;
  const sim = await grpcSim({ role, rooms, bootstrapTimeoutMs: 5000, ...o });
  const seen: GenerateRequestPb[] = [];
  sim.server.onGenerate = (r) => seen.push(r);
  return { engine: sim.engine, server: sim.server, rooms, url: sim.url, seen };
}

/** Stops simulated legs and their bootstrap rooms. */
async function stopLegs(legs: Leg[]): Promise<void> {
  for (const l of legs) {
    await l.server.close();
    await l.engine.close();
    await l.rooms?.close();
  }
}

/** A gateway in PD mode over `prefill` and `decode` with the Qwen3 tokenizer and gRPC clients. */
function pdGateway(
  prefill: { url: string; bootstrapPort: number | null }[],
  decode: string[],
  extra: Parameters<typeof startGateway>[1] = {},
): Promise<TestGateway> {
  return startGateway([], {
    modelPath: "qwen3",
    pd: {
      enabled: true,
      prefill,
      decode,
      prefillPolicy: "round_robin",
      decodePolicy: "round_robin",
    },
    ...extra,
  }, { grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) } });
}

async function withPd(
  prefills: Leg[],
  decodes: Leg[],
  fn: (g: TestGateway) => Promise<void>,
) {
  const g = await pdGateway(
    prefills.map((p) => ({ url: p.url, bootstrapPort: p.rooms?.port ?? null })),
    decodes.map((d) => d.url),
  );
  try {
    await g.ready(prefills.length + decodes.length);
    await fn(g);
    for (const w of g.gw.registry.all()) assert.equal(w.inFlight, 0, `${w.url} freed`);
  } finally {
    await g.close();
    await stopLegs([...prefills, ...decodes]);
  }
}

const openai = (g: TestGateway) => new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "none" });
const messages = [{ role: "user" as const, content: "Explain disaggregated serving. ".repeat(8) }];

Deno.test("grpc pd: the openai client gets chat and completions, whole and streamed, from the decode leg", async () => {
  const p = await leg("prefill");
  const d = await leg("decode");
  await withPd([p], [d], async (g) => {
    const client = openai(g);
    const r = await client.chat.completions.create({ model: "qwen3-sim", messages, max_tokens: 5 });
    assert.equal(r.usage?.completion_tokens, 5, "the decode leg's answer");
    assert.ok(r.choices[0].message.content!.length > 0);
    const stream = await client.chat.completions.create({
      model: "qwen3-sim",
      messages,
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage = null;
    for await (const ch of stream) {
      text += ch.choices[0]?.delta?.content ?? "";
      if (ch.usage) usage = ch.usage;
    }
    assert.ok(text.length > 0);
    assert.equal(usage?.completion_tokens, 6);
    const c = await client.completions.create({
      model: "qwen3-sim",
      prompt: "Hello",
      max_tokens: 3,
    });
    assert.equal(c.usage?.completion_tokens, 3);

    // Both legs got the same request with the prefill's bootstrap address and a room.
    assert.equal(p.seen.length, 3);
    assert.equal(d.seen.length, 3);
    for (let i = 0; i < 3; i++) {
      const dp = p.seen[i].disaggregated_params!;
      assert.equal(dp.bootstrap_host, "127.0.0.1");
      assert.equal(dp.bootstrap_port, p.rooms!.port);
      assert.ok(Number.isInteger(dp.bootstrap_room) && dp.bootstrap_room >= 0);
      assert.deepEqual(d.seen[i].disaggregated_params, dp);
      assert.deepEqual(d.seen[i].tokenized.input_ids, p.seen[i].tokenized.input_ids);
    }
    assert.notEqual(
      p.seen[0].disaggregated_params!.bootstrap_room,
      p.seen[1].disaggregated_params!.bootstrap_room,
      "a fresh room per request",
    );
    // The prefill computed the prompts (one token each), the decode generated everything.
    const ps = p.engine.stats().totals;
    const ds = d.engine.stats().totals;
    assert.equal(ps.generatedTokens, 3);
    assert.ok(ds.generatedTokens > ps.generatedTokens, "the decode leg generated the answers");
    assert.equal(
      p.seen[0].tokenized.input_ids.length,
      qwen3().encode(qwen3().applyChatTemplate(messages), false).length,
      "exact token ids from the gateway's tokenizer",
    );
  });
});

Deno.test("grpc pd: a failing prefill or decode costs a retry on another pair, the other leg not blamed", async () => {
  const badP = await leg("prefill", { failGenerate: true });
  const goodP = await leg("prefill");
  const badD = await leg("decode", { failGenerate: true });
  const goodD = await leg("decode");
  await withPd([badP, goodP], [badD, goodD], async (g) => {
    for (let i = 0; i < 4; i++) {
      const r = await openai(g).chat.completions.create({
        model: "qwen3-sim",
        messages,
        max_tokens: 3,
        stream: i % 2 === 1,
      });
      if (Symbol.asyncIterator in r) {
        let n = 0;
        for await (const _ of r) n++;
        assert.ok(n > 0, `request ${i}`);
      } else {
        assert.equal(r.usage?.completion_tokens, 3, `request ${i}`);
      }
    }
    const reg = g.gw.registry;
    assert.ok(reg.byUrl(badP.url)!.breaker.consecutiveFailures > 0, "the failing prefill blamed");
    assert.ok(reg.byUrl(badD.url)!.breaker.consecutiveFailures > 0, "the failing decode blamed");
    assert.equal(reg.byUrl(goodP.url)!.breaker.consecutiveFailures, 0);
    assert.equal(reg.byUrl(goodD.url)!.breaker.consecutiveFailures, 0);
  });
});

Deno.test("grpc pd: only failing legs give the client one clear error", async () => {
  const p = await leg("prefill", { failGenerate: true });
  const d = await leg("decode");
  await withPd([p], [d], async (g) => {
    const r = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "qwen3-sim", messages, max_tokens: 2 }),
    });
    assert.equal(r.status, 502);
    const j = await r.json();
    assert.match(j.error.message, /PD disaggregation request failed/);
    assert.equal(
      g.gw.registry.byUrl(d.url)!.breaker.consecutiveFailures,
      0,
      "the decode leg, cancelled, is not blamed",
    );
  });
});

Deno.test("grpc pd: a fleet mixing protocols, or gRPC legs without a tokenizer, is refused at start", () => {
  const c = defaultConfig();
  c.pd = {
    ...c.pd,
    enabled: true,
    prefill: [{ url: "grpc://127.0.0.1:50051", bootstrapPort: 8998 }],
    decode: ["http://127.0.0.1:30001"],
  };
  c.modelPath = "qwen3";
  assert.throws(
    () => validateConfig(structuredClone(c)),
    (e) => e instanceof ConfigError && /one protocol/.test(e.message),
  );
  c.pd.decode = ["grpc://127.0.0.1:50052"];
  validateConfig(structuredClone(c));
  c.modelPath = null;
  assert.throws(
    () => validateConfig(structuredClone(c)),
    (e) => e instanceof ConfigError && /--model-path/.test(e.message),
  );
});

Deno.test("grpc pd: the pair's protocol follows the available workers; a missing bootstrap port is sglang's 8998", async () => {
  const p = await leg("prefill");
  const d = await leg("decode");
  const httpP = new FakeWorker({ model: "qwen3-sim" });
  const httpD = new FakeWorker({ model: "qwen3-sim" });
  const g = await pdGateway([{ url: httpP.url, bootstrapPort: null }], [httpD.url]);
  try {
    await g.ready(2);
    for (const [url, type, port] of [[p.url, "prefill", p.rooms!.port], [d.url, "decode", null]]) {
      const r = await fetch(`${g.url}/workers`, {
        method: "POST",
        body: JSON.stringify({
          url: String(url).replace("grpc://", ""),
          connection_mode: "grpc",
          worker_type: type,
          bootstrap_port: port,
        }),
      });
      assert.equal(r.status, 202, await r.text());
    }
    await g.ready(4);
    const ask = () =>
      fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "qwen3-sim", messages, max_tokens: 2 }),
      });
    // The first prefill speaks HTTP: pairs are HTTP while it is available.
    let r = await ask();
    assert.equal(r.status, 200);
    await r.text();
    assert.equal(httpD.seen.requests, 1);
    assert.equal(d.seen.length, 0);
    // It goes down: the gRPC pair serves.
    g.gw.registry.byUrl(httpP.url)!.setStatus("not_ready");
    r = await ask();
    assert.equal(r.status, 200, await r.clone().text());
    await r.text();
    assert.equal(d.seen.length, 1);
    assert.equal(p.seen[0].disaggregated_params!.bootstrap_port, p.rooms!.port);
  } finally {
    await g.close();
    await Promise.all([httpP.close(), httpD.close()]);
    await stopLegs([p, d]);
  }
  // A prefill registered without a bootstrap port is sent sglang's default.
  const p2 = await leg("prefill");
  const d2 = await leg("decode", { bootstrapTimeoutMs: 50 });
  const g2 = await pdGateway([{ url: p2.url, bootstrapPort: null }], [d2.url], {
    retry: { maxAttempts: 1 },
  });
  try {
    await g2.ready(2);
    const r = await fetch(`${g2.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "qwen3-sim", prompt: "hi", max_tokens: 2 }),
    });
    await r.body?.cancel();
    assert.equal(p2.seen[0].disaggregated_params!.bootstrap_port, 8998);
  } finally {
    await g2.close();
    await stopLegs([p2, d2]);
  }
});
