/**
 * Per-tenant rate limits in PD mode (`--pd-disaggregation`), on fake prefill and decode workers
 * that report different usage, under fake time (no refill, so counts are exact): a PD request is
 * reserved once, not once per leg, nor again when a failed pair is retried; its charge is
 * settled to the decode leg's usage (the prefill's is neither used nor added), or for a stream
 * without usage to the decode leg's events; a tenant over its limit gets SMG's 429 with
 * `Retry-After`, and neither leg hears of the refused request.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { scopeId } from "../../lib/limits/limiter.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { until } from "../../support/wait.ts";

const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };
/** What the gateway reserves for `chat`: its prompt estimate ("hello": 2 tokens). */
const ESTIMATE = 2;
const TENANT = scopeId("ip:127.0.0.1", null);
const YAML = `default_policy:
  tokens_per_minute: 1000
  requests_per_minute: 1000
tenants:
  - tenant_key: ip:127.0.0.1
    tokens_per_minute: 1000
    requests_per_minute: 3
`;

/** Runs `fn` with a limited PD gateway on fake time over `prefills` and `decodes`. */
async function withPdLimits(
  prefills: FakeWorker[],
  decodes: FakeWorker[],
  fn: (g: TestGateway) => Promise<void>,
) {
  const path = Deno.makeTempFileSync({ dir: "/tmp", suffix: ".yaml" });
  Deno.writeTextFileSync(path, YAML);
  const g = await startGateway([], {
    pd: {
      enabled: true,
      prefill: prefills.map((w) => ({ url: w.url, bootstrapPort: null })),
      decode: decodes.map((w) => w.url),
      prefillPolicy: "round_robin",
      decodePolicy: "round_robin",
    },
    tenantRateLimit: { enabled: true, configPath: path, scope: "router", syncMs: 100 },
  }, { clock: new FakeClock() });
  try {
    await g.gw.whenReady(prefills.length + decodes.length);
    await fn(g);
  } finally {
    await g.close();
    await Promise.all([...prefills, ...decodes].map((w) => w.close()));
    Deno.removeSync(path);
  }
}

function post(g: TestGateway, body: unknown) {
  return fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** A request through `g` read to its end, once its reservation is resolved: its status. */
async function served(g: TestGateway, body: unknown): Promise<number> {
  const res = await post(g, body);
  await res.arrayBuffer();
  const l = g.gw.limits!;
  await until(() => l.open === 0, l.subscribe.bind(l), "the reservation settled");
  return res.status;
}

/** The tenant's buckets now. */
const left = (g: TestGateway) => g.gw.limits!.available(TENANT)!;

async function metric(g: TestGateway, series: string): Promise<number> {
  const text = await fetch(g.metricsUrl).then((r) => r.text());
  const m = new RegExp(`^${series.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

Deno.test("tenant limits in PD mode: reserved once per request, settled to the decode leg, then SMG's 429", async () => {
  const prefill = new FakeWorker({ usage: { prompt: 100, completion: 1 } });
  const decode = new FakeWorker({ usage: { prompt: 7, completion: 4 } });
  await withPdLimits([prefill], [decode], async (g) => {
    assert.deepEqual(left(g), { tokens: 1000, requests: 3 });
    assert.equal(await served(g, chat), 200);
    assert.equal(prefill.seen.requests, 1, "both legs ran");
    assert.equal(decode.seen.requests, 1);
    assert.deepEqual(left(g), { tokens: 1000 - 11, requests: 2 }, "one request, 7 + 4 tokens");
    // A stream without usage: the estimate and the decode leg's three events.
    assert.equal(await served(g, { ...chat, stream: true }), 200);
    assert.deepEqual(left(g), { tokens: 1000 - 11 - (ESTIMATE + 3), requests: 1 });
    assert.equal(await served(g, chat), 200);
    assert.deepEqual(left(g), { tokens: 1000 - 11 - (ESTIMATE + 3) - 11, requests: 0 });

    const r = await post(g, chat);
    assert.equal(r.status, 429);
    assert.equal(r.headers.get("x-smg-error-code"), "tenant_rate_limit_exceeded");
    assert.equal(r.headers.get("retry-after"), "20", "a request every 20 s");
    assert.equal((await r.json()).error.code, "tenant_rate_limit_exceeded");
    assert.equal(prefill.seen.requests, 3, "the refused request reached no leg");
    assert.equal(decode.seen.requests, 3);
    assert.equal(await metric(g, 'smg_tenant_rate_limit_total{result="allowed"}'), 3);
    assert.equal(await metric(g, 'smg_tenant_rate_limit_total{result="rejected"}'), 1);
    assert.equal(
      await metric(g, 'smg_tenant_rate_limit_tokens_total{kind="reserved"}'),
      3 * ESTIMATE,
    );
    assert.equal(
      await metric(g, 'smg_tenant_rate_limit_tokens_total{kind="settled"}'),
      11 + ESTIMATE + 3 + 11,
    );
  });
});

Deno.test("tenant limits in PD mode: a pair retried after a failed prefill is reserved and settled once", async () => {
  const bad = new FakeWorker({ mode: { kind: "status", status: 500 } });
  const good = new FakeWorker({ usage: { prompt: 100, completion: 1 } });
  const decode = new FakeWorker({ usage: { prompt: 7, completion: 4 } });
  await withPdLimits([bad, good], [decode], async (g) => {
    for (let i = 0; i < 2; i++) assert.equal(await served(g, chat), 200, `request ${i}`);
    assert.ok(bad.seen.requests >= 1, "a pair failed and was retried");
    assert.deepEqual(left(g), { tokens: 1000 - 2 * 11, requests: 1 });
    assert.equal(await metric(g, 'smg_tenant_rate_limit_total{result="allowed"}'), 2);
  });
});
