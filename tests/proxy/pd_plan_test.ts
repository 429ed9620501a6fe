/**
 * The PD path's branches with a scripted upstream, no sockets: a leg that fails to connect or
 * answers a retryable status costs a retry with another pair while the other leg is cancelled
 * and freed; a leg's own non-retryable error passes through; the prefill's body is drained in
 * the background (a drain that breaks counts against the prefill worker, not the client); both
 * legs get the same bootstrap fields.
 */

import assert from "node:assert/strict";
import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { Admission } from "../../lib/proxy/admission.ts";
import { InferenceProxy } from "../../lib/proxy/proxy.ts";
import { RequestInbound, toResponse } from "../../lib/server/inbound.ts";
import { type FakeReply, FakeUpstream } from "../support/fake_upstream.ts";
import { testConfig } from "../../support/gateway.ts";
import { workerSetup } from "../support/workers.ts";
import { burstFleet } from "../support/burst.ts";

const OK: FakeReply = { status: 200, chunks: ['{"ok":', "true}"] };
const SSE: FakeReply = {
  status: 200,
  chunks: ["data: 1\n\n", "data: [DONE]\n\n"],
  headers: [["content-type", "text/event-stream"]],
};

function setup(prefill: Record<string, FakeReply[]>, decode: Record<string, FakeReply[]>) {
  const config = testConfig({});
  const clock = new FakeClock(1000);
  const { registry, manager } = workerSetup(clock, {
    health: config.health,
    circuitBreaker: config.circuitBreaker,
  });
  const add = (url: string, workerType: "prefill" | "decode") => {
    const w = manager.add({ url, models: ["m"], workerType, bootstrapPort: 9000 });
    w.setStatus("ready");
    return w;
  };
  const prefills = Object.keys(prefill).map((u) => add(u, "prefill"));
  const decodes = Object.keys(decode).map((u) => add(u, "decode"));
  const upstream = new FakeUpstream({ ...prefill, ...decode });
  const metrics = new Metrics();
  const proxy = new InferenceProxy({
    config,
    registry,
    policies: { forModel: () => new RoundRobinPolicy() },
    metrics,
    log: silentLogger,
    clock,
    random: seededRandom(7),
    upstream,
    admission: new Admission(config.admission, metrics, clock),
    pd: { prefill: new RoundRobinPolicy(), decode: new RoundRobinPolicy() },
  });
  const send = async (stream = false, close = true) => {
    const done = Promise.withResolvers<void>();
    const req = new Request("http://gw/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream }),
    });
    const ctx = { requestId: "r1", completed: done.promise };
    const res = toResponse(await proxy.handle(new RequestInbound(req), "chat", ctx));
    const text = await res.text();
    done.resolve();
    await done.promise;
    // The drain runs in the background; let it finish.
    for (let i = 0; i < 10; i++) await Promise.resolve();
    if (close) await proxy.close();
    return { res, text };
  };
  const inFlight = () => [...prefills, ...decodes].map((w) => w.inFlight);
  return { send, upstream, prefills, decodes, inFlight, metrics, proxy };
}

Deno.test("pd plan: both legs get the same body with bootstrap fields; the client gets the decode answer", async () => {
  const t = setup({ "http://p1": [OK] }, { "http://d1": [{ status: 200, chunks: ["decoded"] }] });
  const r = await t.send();
  assert.equal(r.res.status, 200);
  assert.equal(r.text, "decoded");
  const [p, d] = [t.upstream.to("http://p1")[0], t.upstream.to("http://d1")[0]];
  assert.deepEqual(p.req.body, d.req.body, "the same bytes to both legs");
  const body = JSON.parse(new TextDecoder().decode(p.req.body!));
  assert.equal(body.bootstrap_host, "p1");
  assert.equal(body.bootstrap_port, 9000);
  assert.equal(typeof body.bootstrap_room, "number");
  assert.equal(p.body!.ended, true, "the prefill response was drained to its end");
  assert.deepEqual(t.inFlight(), [0, 0]);
});

Deno.test("pd plan: a prefill that cannot be reached costs a retry with another prefill; the decode is cancelled", async () => {
  const t = setup(
    { "http://p1": [{ error: "connect" }], "http://p2": [OK] },
    { "http://d1": [{ status: 200, chunks: ["a"] }, { status: 200, chunks: ["b"] }] },
  );
  const r = await t.send();
  assert.equal(r.res.status, 200);
  assert.equal(t.upstream.to("http://p1").length, 1);
  assert.equal(t.upstream.to("http://p2").length, 1);
  const d = t.upstream.to("http://d1");
  assert.equal(d.length, 2, "the decode worker did not fail, so it is picked again");
  assert.equal(d[0].body!.cancelled, true, "the first attempt's decode response was abandoned");
  assert.equal(r.text, "b");
  assert.deepEqual(t.inFlight(), [0, 0, 0]);
  assert.equal(t.prefills[0].breaker.consecutiveFailures, 1);
});

Deno.test("pd plan: a decode 503 is retried on another decode; the prefill of that attempt was drained", async () => {
  const t = setup(
    { "http://p1": [OK] },
    { "http://d1": [{ status: 503, chunks: ["busy"] }], "http://d2": [SSE] },
  );
  const r = await t.send(true);
  assert.equal(r.res.status, 200);
  assert.match(r.text, /\[DONE\]/);
  const p = t.upstream.to("http://p1");
  assert.equal(p.length, 2);
  assert.ok(p.every((c) => c.body!.ended), "each prefill response drained");
  assert.deepEqual(t.inFlight(), [0, 0, 0]);
});

Deno.test("pd plan: a leg's non-retryable error passes through as the worker sent it; the other leg is freed", async () => {
  const prefill400: FakeReply = {
    status: 400,
    chunks: ['{"error":"bad prefill"}'],
    headers: [["content-type", "application/json"]],
  };
  const t = setup({ "http://p1": [prefill400] }, { "http://d1": [OK] });
  const r = await t.send();
  assert.equal(r.res.status, 400);
  assert.equal(r.text, '{"error":"bad prefill"}');
  assert.equal(t.upstream.to("http://d1")[0].body!.cancelled, true);
  assert.deepEqual(t.inFlight(), [0, 0]);
  const t2 = setup({ "http://p1": [OK] }, { "http://d1": [{ status: 422, chunks: ["nope"] }] });
  const r2 = await t2.send();
  assert.equal(r2.res.status, 422);
  assert.equal(r2.text, "nope");
  assert.equal(t2.upstream.to("http://p1")[0].body!.ended, true, "prefill drained");
});

Deno.test("pd plan: a prefill body that breaks while drained counts against the prefill, not the client", async () => {
  const t = setup(
    { "http://p1": [{ status: 200, chunks: ["x"], breakAfter: true }] },
    { "http://d1": [{ status: 200, chunks: ["fine"] }] },
  );
  const r = await t.send();
  assert.equal(r.res.status, 200);
  assert.equal(r.text, "fine");
  assert.equal(t.prefills[0].breaker.consecutiveFailures, 1);
  assert.equal(t.decodes[0].breaker.consecutiveFailures, 0);
  assert.deepEqual(t.inFlight(), [0, 0]);
});

Deno.test("pd plan: when every pair fails the last failure is returned and the retries are counted", async () => {
  const t = setup({ "http://p1": [{ error: "closed" }] }, { "http://d1": [OK] });
  const r = await t.send();
  assert.equal(r.res.status, 502);
  assert.match(JSON.parse(r.text).error.message, /PD disaggregation request failed/);
  assert.deepEqual(t.inFlight(), [0, 0]);
  const text = await t.metrics.render();
  assert.match(text, /^smg_worker_retries_total\{[^}]*"pd"[^}]*\} [1-9]/m);
  assert.match(text, /^smg_worker_retries_exhausted_total\{[^}]*"pd"[^}]*\} 1$/m);
});

Deno.test("pd plan: a prefill still draining at shutdown is stopped unblamed, and shutdown waits for it", async () => {
  const t = setup(
    { "http://p1": [{ status: 200, chunks: ["x"], hang: true }] },
    { "http://d1": [{ status: 200, chunks: ["fine"] }] },
  );
  const r = await t.send(false, false);
  assert.equal(r.text, "fine");
  assert.deepEqual(t.inFlight(), [1, 0], "the drain holds the prefill's slot");
  await t.proxy.close();
  assert.equal(t.upstream.to("http://p1")[0].body!.cancelled, true);
  assert.deepEqual(t.inFlight(), [0, 0], "closed once the drain has settled");
  assert.equal(t.prefills[0].breaker.consecutiveFailures, 0, "not the prefill's fault");
});

Deno.test("pd plan: requests are counted with backend_type pd and a selection per leg", async () => {
  const t = setup({ "http://p1": [OK] }, { "http://d1": [OK] });
  await t.send();
  const text = await t.metrics.render();
  assert.match(text, /^smg_router_requests_total\{[^}]*backend_type="pd"[^}]*\} 1$/m);
  assert.doesNotMatch(text, /backend_type="regular"/);
  for (const type of ["prefill", "decode"]) {
    assert.match(
      text,
      new RegExp(`^smg_worker_selection_total\\{worker_type="${type}"[^}]*\\} 1$`, "m"),
    );
  }
});

Deno.test("pd plan: a decode that cannot be reached stops the prefill already draining, unblamed", async () => {
  const t = setup(
    { "http://p1": [{ status: 200, chunks: ["x"], hang: true }, OK] },
    { "http://d1": [{ error: "connect" }], "http://d2": [{ status: 200, chunks: ["fine"] }] },
  );
  const r = await t.send(false, false); // not closed: close would stop any drain itself
  assert.equal(r.res.status, 200);
  assert.equal(r.text, "fine");
  const p = t.upstream.to("http://p1");
  assert.equal(p.length, 2, "the retry pairs the prefill again");
  assert.equal(p[0].body!.cancelled, true, "the first attempt's prefill was stopped");
  assert.equal(t.prefills[0].breaker.consecutiveFailures, 0, "not the prefill's fault");
  assert.equal(t.decodes[0].breaker.consecutiveFailures, 1);
  assert.deepEqual(t.inFlight(), [0, 0, 0]);
  await t.proxy.close();
});

Deno.test("pd: a burst decided in one turn spreads both legs evenly under least_load (each leg charged when picked)", async () => {
  const t = burstFleet(4, true);
  await t.burst(8);
  const per = new Map<string, number>();
  for (const u of t.calls) per.set(u, (per.get(u) ?? 0) + 1);
  assert.equal(per.size, 8, `every prefill and decode worker used: ${JSON.stringify([...per])}`);
  assert.deepEqual(new Set(per.values()), new Set([2]), JSON.stringify([...per]));
  for (const w of t.registry.all()) {
    assert.equal(w.inFlight, 0, "every slot given back");
    assert.equal(w.prefillTokens, 0, "every backlog charge given back");
  }
});
