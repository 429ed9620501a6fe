/**
 * Per-tenant rate limits on gRPC workers (simulated sglang schedulers behind `grpc://`): the
 * exact prompt token count is reserved, the reservation settled to the gateway's own count of
 * the answer (whole and streamed), the 429 is SMG's, and a client that leaves mid-stream is
 * charged the tokens generated so far.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { scopeId } from "../../lib/limits/limiter.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { until } from "../../support/wait.ts";
import { grpcSim } from "../support/grpc_sim.ts";

const YAML = `default_policy:
  tokens_per_minute: 100000
  requests_per_minute: 3
`;

async function withGrpcLimits(fn: (g: TestGateway) => Promise<void>, decodeBaseMs = 0.2) {
  const sim = await grpcSim({ maxNewTokens: 64 }, decodeBaseMs);
  const path = Deno.makeTempFileSync({ dir: "/tmp", suffix: ".yaml" });
  Deno.writeTextFileSync(path, YAML);
  const g = await startGateway([sim.url], {
    modelPath: "qwen3",
    tenantRateLimit: { enabled: true, configPath: path, scope: "router", syncMs: 100 },
  }, { grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) } });
  try {
    await fn(g);
  } finally {
    await g.close();
    await sim.close();
    Deno.removeSync(path);
  }
}

const TENANT = scopeId("ip:127.0.0.1", null);

/** Tokens requests were charged so far (`smg_tenant_rate_limit_tokens_total{kind="settled"}`). */
async function settled(g: TestGateway): Promise<number> {
  const text = await fetch(g.metricsUrl).then((r) => r.text());
  return Number(/smg_tenant_rate_limit_tokens_total\{kind="settled"\} (\d+)/.exec(text)?.[1] ?? 0);
}

Deno.test("tenant limits on gRPC workers: settled to the gateway's count; the 429 is SMG's", async () => {
  await withGrpcLimits(async (g) => {
    const l = g.gw.limits!;
    const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Say hello in five words" }];
    const c = await client.chat.completions.create({ model: "qwen3-sim", messages, max_tokens: 5 });
    assert.equal(await settled(g), c.usage!.total_tokens);
    const stream = await client.chat.completions.create({
      model: "qwen3-sim",
      messages,
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage ??= chunk.usage ?? undefined;
    await until(() => l.open === 0, l.subscribe.bind(l), "the stream's settlement");
    assert.equal(await settled(g), c.usage!.total_tokens + usage!.total_tokens);
    // The third request of the minute passes, the fourth is refused (20 s until the next).
    const ok = await fetch(`${g.url}/generate`, {
      method: "POST",
      body: JSON.stringify({ text: "hi", sampling_params: { max_new_tokens: 2 } }),
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
    const denied = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "qwen3-sim", messages }),
    });
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get("retry-after"), "20");
    assert.equal((await denied.json()).error.code, "tenant_rate_limit_exceeded");
  });
});

Deno.test("tenant limits on gRPC workers: a client leaving mid-stream pays for what was generated", async () => {
  await withGrpcLimits(async (g) => {
    const l = g.gw.limits!;
    const res = await fetch(`${g.url}/generate`, {
      method: "POST",
      body: JSON.stringify({ text: "Once upon a time", stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    await reader.cancel();
    await until(() => l.open === 0, l.subscribe.bind(l), "the reservation freed");
    const charged = await settled(g);
    assert.ok(l.available(TENANT)!.requests < 3);
    const prompt = qwen3().encode("Once upon a time", false).length;
    assert.ok(charged > prompt && charged < prompt + 64, `charged ${charged}, prompt ${prompt}`);
  }, 20);
});
