/**
 * The probe and info routes as plain functions over a real registry and the HTTP worker
 * control over a fake fetch: `/readiness` reasons, `/v1/models` from the registry, pass-through
 * to the first ready worker, and the `/get_loads` and `/flush_cache` fan-outs.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import type { WorkerStatus } from "../../lib/core/types.ts";
import {
  firstReady,
  flushCache,
  getLoads,
  type InfoApiDeps,
  listModels,
  readiness,
} from "../../lib/server/info_api.ts";
import type { FetchFn } from "../../lib/workers/http.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";
import type { WorkerSpec } from "../../lib/workers/worker.ts";
import { workerSetup } from "../support/workers.ts";

type Route = (init: RequestInit) => Response | Promise<Response>;

/** Routes keyed by "<worker url><path>"; anything else is a 404. */
function setup(routes: Record<string, Route> = {}) {
  const clock = new FakeClock(1000);
  const { registry, manager } = workerSetup(clock);
  const calls: { url: string; method: string; auth: string | null }[] = [];
  const fetchFn: FetchFn = (url, init) => {
    calls.push({
      url,
      method: init.method ?? "GET",
      auth: new Headers(init.headers).get("authorization"),
    });
    const u = new URL(url);
    const r = routes[`${u.origin}${u.pathname}`];
    return Promise.resolve(r ? r(init) : new Response("not found", { status: 404 }));
  };
  let draining = false;
  const deps: InfoApiDeps = {
    registry,
    control: httpWorkerControl(fetchFn),
    draining: () => draining,
    timeoutMs: 1000,
    clock,
  };
  const add = (spec: WorkerSpec, status: WorkerStatus = "ready") => {
    const w = manager.add(spec);
    w.setStatus(status);
    return w;
  };
  return {
    deps,
    registry,
    clock,
    calls,
    add,
    setDraining: (v: boolean) => (draining = v),
    stop: () => manager.stop(),
  };
}

Deno.test("readiness: 503 insufficient healthy workers when none is ready", async () => {
  const t = setup();
  let res = readiness(t.deps);
  assert.equal(res.status, 503);
  assert.deepEqual(await res.json(), {
    status: "not ready",
    reason: "insufficient healthy workers",
    healthy_workers: 0,
    total_workers: 0,
  });
  t.add({ url: "http://a" }, "pending");
  t.add({ url: "http://b" }, "not_ready");
  res = readiness(t.deps);
  assert.equal(res.status, 503);
  assert.equal((await res.json()).total_workers, 2);
  await t.stop();
});

Deno.test("readiness: 200 with counts once a worker is ready", async () => {
  const t = setup();
  t.add({ url: "http://a" });
  t.add({ url: "http://b" }, "pending");
  const res = readiness(t.deps);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: "ready", healthy_workers: 1, total_workers: 2 });
  await t.stop();
});

Deno.test("readiness: 503 draining while shutting down, even with ready workers", async () => {
  const t = setup();
  t.add({ url: "http://a" });
  t.setDraining(true);
  const res = readiness(t.deps);
  assert.equal(res.status, 503);
  assert.deepEqual(await res.json(), { status: "not ready", reason: "draining" });
  await t.stop();
});

Deno.test("listModels: 503 text when no worker names a model", async () => {
  const t = setup();
  t.add({ url: "http://a" }); // models unknown
  const res = listModels(t.deps);
  assert.equal(res.status, 503);
  assert.equal(await res.text(), "No models available");
  await t.stop();
});

Deno.test("listModels: the OpenAI list of every model, deduplicated", async () => {
  const t = setup();
  t.add({ url: "http://a", models: ["llama", "qwen"] });
  t.add({ url: "http://b", models: ["qwen", "mistral"] });
  const res = listModels(t.deps);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    object: "list",
    data: ["llama", "qwen", "mistral"].map((id) => ({
      id,
      object: "model",
      created: 0,
      owned_by: "self_hosted",
    })),
  });
  await t.stop();
});

Deno.test("firstReady: 503 no_workers with Retry-After when no worker is available", async () => {
  const t = setup();
  t.add({ url: "http://pending" }, "pending");
  const busy = t.add({ url: "http://vetoed" });
  busy.overloaded = true;
  const res = await firstReady(t.deps, "serverInfo", "rid-1");
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("x-smg-error-code"), "no_workers");
  assert.equal(res.headers.get("retry-after"), "1");
  assert.equal(res.headers.get("x-request-id"), "rid-1");
  assert.equal((await res.json()).error.code, "no_workers");
  assert.deepEqual(t.calls, [], "no worker was called");
  await t.stop();
});

Deno.test("firstReady: passes the worker's answer through, from the first available worker", async () => {
  const t = setup({
    "http://b/get_server_info": () => Response.json({ version: "0.4" }),
    "http://c/get_server_info": () => Response.json({ version: "wrong worker" }),
  });
  t.add({ url: "http://a" }, "pending");
  const b = t.add({ url: "http://b", apiKey: "kb" });
  t.add({ url: "http://c" });
  const res = await firstReady(t.deps, "serverInfo", "rid-2");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.equal(res.headers.get("x-smg-routed-worker-id"), b.id);
  assert.equal(res.headers.get("x-request-id"), "rid-2");
  assert.deepEqual(await res.json(), { version: "0.4" });
  assert.deepEqual(t.calls, [{
    url: "http://b/get_server_info",
    method: "GET",
    auth: "Bearer kb",
  }]);
  await t.stop();
});

Deno.test("firstReady: a worker whose breaker is open is skipped", async () => {
  const t = setup({ "http://b/health_generate": () => new Response("OK") });
  const a = t.add({ url: "http://a" });
  t.add({ url: "http://b" });
  for (let i = 0; i < 10; i++) a.breaker.record("failure", t.clock.now());
  assert.equal(a.breaker.state(t.clock.now()), "open");
  const res = await firstReady(t.deps, "healthGenerate", "r");
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/plain");
  assert.equal(await res.text(), "OK");
  assert.deepEqual(t.calls.map((c) => c.url), ["http://b/health_generate"]);
  await t.stop();
});

Deno.test("firstReady: worker error statuses pass through unchanged", async () => {
  const t = setup({
    "http://a/get_model_info": () => new Response("model not loaded", { status: 500 }),
  });
  t.add({ url: "http://a" });
  const res = await firstReady(t.deps, "modelInfo", "r");
  assert.equal(res.status, 500);
  assert.equal(await res.text(), "model not loaded");
  await t.stop();
});

Deno.test("firstReady: 502 call_upstream_failed when the worker is unreachable", async () => {
  const t = setup({ "http://a/get_server_info": () => Promise.reject(new TypeError("refused")) });
  t.add({ url: "http://a" });
  const res = await firstReady(t.deps, "serverInfo", "rid-3");
  assert.equal(res.status, 502);
  assert.equal(res.headers.get("x-smg-error-code"), "call_upstream_failed");
  assert.equal(res.headers.get("x-request-id"), "rid-3");
  const body = await res.json();
  assert.equal(body.error.code, "call_upstream_failed");
  assert.match(body.error.message, /http:\/\/a unreachable: refused/);
  await t.stop();
});

Deno.test("getLoads: load is the sum of num_used_tokens, or -1 without a report", async () => {
  const t = setup({
    "http://a/v1/loads": () =>
      Response.json({
        loads: [{ num_used_tokens: 100, num_running_reqs: 1 }, {
          num_used_tokens: 50,
          num_running_reqs: 2,
        }],
      }),
  });
  t.add({ url: "http://a" });
  t.add({ url: "http://b" }); // serves no load endpoint at all
  t.add({ url: "http://c" }, "pending"); // not asked
  const res = await getLoads(t.deps);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body.workers.map((w: { worker: string; load: number }) => [w.worker, w.load]), [
    ["http://a", 150],
    ["http://b", -1],
    ["http://c", -1],
  ]);
  assert.equal(body.workers[0].details.length, 2, "per-rank details are included");
  assert.equal(body.workers[1].details, undefined);
  assert.ok(!t.calls.some((c) => c.url.startsWith("http://c")), "a pending worker is not asked");
  await t.stop();
});

Deno.test("flushCache: 200 success when every worker flushed", async () => {
  const t = setup({
    "http://a/flush_cache": () => new Response("Cache flushed"),
    "http://b/flush_cache": () => new Response("Cache flushed"),
  });
  t.add({ url: "http://a", apiKey: "ka" });
  t.add({ url: "http://b" });
  const res = await flushCache(t.deps);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.status, "success");
  assert.equal(body.workers_flushed, 2);
  assert.equal(body.total_workers, 2);
  assert.equal(body.total_http_workers, 2);
  assert.equal(body.successful, undefined);
  assert.equal(body.failed, undefined);
  assert.deepEqual(t.calls.map((c) => [c.url, c.method, c.auth]), [
    ["http://a/flush_cache", "POST", "Bearer ka"],
    ["http://b/flush_cache", "POST", null],
  ]);
  await t.stop();
});

Deno.test("flushCache: 206 partial_success listing who flushed and who failed, and why", async () => {
  const t = setup({
    "http://a/flush_cache": () => new Response("Cache flushed"),
    "http://b/flush_cache": () => new Response("busy", { status: 503 }),
    "http://c/flush_cache": () => Promise.reject(new TypeError("connection refused")),
  });
  t.add({ url: "http://a" });
  t.add({ url: "http://b" });
  t.add({ url: "http://c" });
  const res = await flushCache(t.deps);
  assert.equal(res.status, 206);
  const body = await res.json();
  assert.equal(body.status, "partial_success");
  assert.equal(body.message, "2 of 3 workers failed");
  assert.equal(body.workers_flushed, 1);
  assert.deepEqual(body.successful, ["http://a"]);
  assert.deepEqual(body.failed, [
    { worker: "http://b", error: "HTTP 503: busy" },
    { worker: "http://c", error: "connection refused" },
  ]);
  await t.stop();
});
