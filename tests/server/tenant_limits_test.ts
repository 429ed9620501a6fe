/**
 * Per-tenant rate limits through the real gateway in front of fake HTTP workers: SMG's 429
 * `tenant_rate_limit_exceeded` body and headers on both servers; each tenant key type (`auth:`
 * from `--tenant-api-key`, `header:` only when trusted, `ip:`, `anonymous`) with its own
 * budget; the reservation settled to the worker's usage (whole answers, sglang streams) or to
 * the events streamed; a retried request reserved once; a client that leaves mid-stream charged
 * what it was sent, the reservation freed.
 */

import assert from "node:assert/strict";
import { scopeId } from "../../lib/limits/limiter.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { type Overrides, startGateway, type TestGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";

const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };

function post(g: TestGateway, body: unknown, headers: Record<string, string> = {}, path?: string) {
  return fetch(g.url + (path ?? "/v1/chat/completions"), {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** The status of a request, its body read to the end. */
async function status(r: Promise<Response>): Promise<number> {
  const res = await r;
  await res.arrayBuffer();
  return res.status;
}

function limitsFile(yaml: string): string {
  const path = Deno.makeTempFileSync({ dir: "/tmp", suffix: ".yaml" });
  Deno.writeTextFileSync(path, yaml);
  return path;
}

// Slow refills (a token and a request a second), so counts read in real time stay near whole.
const DEFAULT = `default_policy:
  tokens_per_minute: 60
  requests_per_minute: 60
`;

const near = (a: number, b: number) => Math.abs(a - b) < 0.3;

async function withLimits(
  yaml: string,
  workers: FakeWorker[],
  fn: (g: TestGateway) => Promise<void>,
  o: Overrides = {},
) {
  const path = limitsFile(yaml);
  const g = await startGateway(workers.map((w) => w.url), {
    ...o,
    tenantRateLimit: { enabled: true, configPath: path, scope: "router", syncMs: 100 },
  });
  try {
    await fn(g);
  } finally {
    await g.close();
    await Promise.all(workers.map((w) => w.close()));
    Deno.removeSync(path);
  }
}

for (const httpServer of ["own", "deno"] as const) {
  Deno.test(`tenant limits (${httpServer}): SMG's 429 body and headers, by client address`, async () => {
    const yaml = DEFAULT + `tenants:
  - tenant_key: ip:127.0.0.1
    tokens_per_minute: 60
    requests_per_minute: 2
`;
    await withLimits(yaml, [new FakeWorker()], async (g) => {
      assert.equal(await status(post(g, chat)), 200);
      assert.equal(await status(post(g, chat)), 200);
      const r = await post(g, chat);
      assert.equal(r.status, 429);
      assert.equal(r.headers.get("x-smg-error-code"), "tenant_rate_limit_exceeded");
      assert.equal(r.headers.get("retry-after"), "30", "a request every 30 s");
      assert.ok(r.headers.get("x-request-id"));
      assert.deepEqual(await r.json(), {
        error: {
          message: "Tenant rate limit exceeded for this request",
          type: "Too Many Requests",
          code: "tenant_rate_limit_exceeded",
          param: null,
        },
      });
      const m = await fetch(g.metricsUrl).then((r) => r.text());
      assert.match(m, /smg_tenant_rate_limit_total\{result="allowed"\} 2/);
      assert.match(m, /smg_tenant_rate_limit_total\{result="rejected"\} 1/);
    }, { httpServer });
  });
}

Deno.test("tenant limits: --tenant-api-key names the tenant; other keys 401; admin refuses tenant keys", async () => {
  const yaml = DEFAULT + `tenants:
  - tenant_key: auth:red
    tokens_per_minute: 60
    requests_per_minute: 1
`;
  await withLimits(yaml, [new FakeWorker()], async (g) => {
    const red = { authorization: "Bearer k-red" };
    const blue = { authorization: "Bearer k-blue" };
    assert.equal(await status(post(g, chat, red)), 200);
    assert.equal(await status(post(g, chat, red)), 429);
    assert.equal(await status(post(g, chat, blue)), 200);
    assert.equal(await status(post(g, chat, blue)), 200);
    assert.equal(await status(post(g, chat)), 401, "a key is required once keys exist");
    assert.equal(await status(post(g, chat, { authorization: "Bearer nope" })), 401);
    assert.equal(await status(fetch(`${g.url}/workers`, { headers: red })), 401);
  }, { tenants: { apiKeys: ["red:k-red", "blue:k-blue"], trustHeader: false, headerName: "x" } });
});

Deno.test("tenant limits: the tenant header counts only when trusted, under its configured name", async () => {
  const yaml = DEFAULT + `tenants:
  - tenant_key: header:team-a
    tokens_per_minute: 60
    requests_per_minute: 1
`;
  await withLimits(yaml, [new FakeWorker()], async (g) => {
    const a = { "x-team": "team-a" };
    assert.equal(await status(post(g, chat, a)), 200);
    assert.equal(await status(post(g, chat, a)), 429);
    assert.equal(await status(post(g, chat, { "x-team": "team-b" })), 200);
    assert.equal(await status(post(g, chat, { "x-smg-tenant-id": "team-a" })), 200);
  }, { tenants: { apiKeys: [], trustHeader: true, headerName: "x-team" } });
  await withLimits(DEFAULT, [new FakeWorker()], async (g) => {
    for (let i = 0; i < 3; i++) {
      assert.equal(await status(post(g, chat, { "x-smg-tenant-id": "team-a" })), 200);
    }
    // Untrusted, the header is ignored: the client's address is the tenant.
    const left = g.gw.limits!.available(scopeId("ip:127.0.0.1", null))!.requests;
    assert.ok(near(left, 57), `${left} left`);
  });
});

Deno.test("tenant limits: a request with no key, header or address is anonymous", async () => {
  const yaml = DEFAULT + `tenants:
  - tenant_key: anonymous
    tokens_per_minute: 60
    requests_per_minute: 1
`;
  await withLimits(yaml, [new FakeWorker()], async (g) => {
    const call = async () => {
      const done = Promise.withResolvers<void>();
      const req = new Request(`${g.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(chat),
      });
      const res = await g.gw.handle(req, done.promise);
      await res.arrayBuffer();
      done.resolve();
      return res.status;
    };
    assert.equal(await call(), 200);
    assert.equal(await call(), 429);
    assert.equal(await status(post(g, chat)), 200, "a client with an address is another tenant");
  });
});

Deno.test("tenant limits: settled to the worker's usage, or to the events a stream carried", async () => {
  await withLimits(DEFAULT, [new FakeWorker()], async (g) => {
    const l = g.gw.limits!;
    const tokens = () => l.available(scopeId("ip:127.0.0.1", null))!.tokens;
    const start = tokens();
    // "hello" is estimated at 2 tokens; the worker reports 3 + 2.
    assert.equal(await status(post(g, chat)), 200);
    assert.ok(near(start - tokens(), 5), `charged ${start - tokens()}`);
    // A chat stream without usage: the estimate and its three events.
    const s1 = tokens();
    assert.equal(await status(post(g, { ...chat, stream: true })), 200);
    await until(() => l.open === 0, l.subscribe.bind(l), "the stream's settlement");
    assert.ok(near(s1 - tokens(), 5), `charged ${s1 - tokens()}`);
    // sglang's stream carries running completion counts: the last one (3) counts.
    const s2 = tokens();
    const gen = { text: "hello world!", stream: true };
    assert.equal(await status(post(g, gen, {}, "/generate")), 200);
    await until(() => l.open === 0, l.subscribe.bind(l), "the stream's settlement");
    assert.ok(near(s2 - tokens(), 6), `charged ${s2 - tokens()}`);
  });
});

Deno.test("tenant limits: a retried request is reserved once", async () => {
  const failing = new FakeWorker({ mode: { kind: "status", status: 503 } });
  await withLimits(DEFAULT, [failing, new FakeWorker()], async (g) => {
    for (let i = 0; i < 4; i++) assert.equal(await status(post(g, chat)), 200);
    assert.ok(failing.seen.requests >= 2, "some requests were retried");
    const l = g.gw.limits!;
    const left = l.available(scopeId("ip:127.0.0.1", null))!.requests;
    assert.ok(near(left, 56), `${left} left`);
    const m = await fetch(g.metricsUrl).then((r) => r.text());
    assert.match(m, /smg_tenant_rate_limit_total\{result="allowed"\} 4/);
  });
});

Deno.test("tenant limits: a client leaving mid-stream is charged what it got, the rest freed", async () => {
  const gate = Promise.withResolvers<void>();
  const w = new FakeWorker({ gate: gate.promise, chunks: 50 });
  await withLimits(DEFAULT, [w], async (g) => {
    const l = g.gw.limits!;
    const tokens = () => l.available(scopeId("ip:127.0.0.1", null))!.tokens;
    const start = tokens();
    const res = await post(g, { ...chat, stream: true });
    const reader = res.body!.getReader();
    await reader.read(); // the first event
    assert.equal(l.open, 1);
    await reader.cancel();
    await within(
      new Promise<void>((resolve) => {
        const off = l.subscribe(() => l.open === 0 && (off(), resolve()));
        if (l.open === 0) resolve();
      }),
      "the reservation freed",
    );
    assert.ok(
      Math.abs(start - tokens() - 3) < 0.1,
      `the estimate and one event: ${start - tokens()}`,
    );
    gate.resolve();
  });
});
