/**
 * The health checker against a scripted fake fetch and a fake clock: activation with model
 * and KV capacity discovery, taking a worker out after failed probes, bringing it back, the start-up timeout,
 * workers with probes off, and the loop itself sleeping on the clock.
 */

import assert from "node:assert/strict";
import { defaultConfig, type HealthConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { HealthChecker } from "../../lib/workers/health.ts";
import type { FetchFn } from "../../lib/workers/http.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";
import { WorkerRegistry } from "../../lib/workers/registry.ts";
import { timerSet } from "../../support/wait.ts";
import { workerSetup } from "../support/workers.ts";

function setup(health: Partial<HealthConfig> = {}) {
  const config = { ...defaultConfig().health, ...health };
  const clock = new FakeClock(0);
  const registry = new WorkerRegistry();
  let up = true;
  const paths: string[] = [];
  const fetchFn: FetchFn = (url) => {
    const path = new URL(url).pathname;
    paths.push(path);
    if (path === "/health") return Promise.resolve(new Response("OK", { status: up ? 200 : 503 }));
    if (path === "/v1/models") return Promise.resolve(Response.json({ data: [{ id: "llama" }] }));
    if (path === "/get_server_info") {
      return Promise.resolve(Response.json({ max_total_num_tokens: 4096 }));
    }
    return Promise.resolve(new Response("", { status: 404 }));
  };
  const checker = new HealthChecker({
    config,
    registry,
    control: httpWorkerControl(fetchFn),
    clock,
    log: silentLogger,
  });
  const { manager } = workerSetup(clock, { registry, health: config });
  return {
    clock,
    registry,
    checker,
    manager,
    paths,
    setUp: (v: boolean) => (up = v),
    /** Advances to the next due probe and runs it. */
    async step(ms: number) {
      clock.advance(ms);
      await checker.tick();
    },
  };
}

Deno.test("health: a new worker is probed at once, its model and KV capacity discovered, then it is ready", async () => {
  const t = setup();
  const w = t.manager.add({ url: "http://w1" });
  assert.equal(w.status, "pending");
  await t.checker.tick();
  assert.equal(w.status, "ready");
  assert.deepEqual(w.models, ["llama"]);
  assert.equal(w.kvCapacity, 4096);
  assert.deepEqual(t.paths, ["/health", "/v1/models", "/get_server_info"]);
});

Deno.test("health: a ready worker leaves after F failed probes and returns after S good ones", async () => {
  const t = setup({ intervalSecs: 10, failureThreshold: 3, successThreshold: 2 });
  const w = t.manager.add({ url: "http://w1", models: ["m"] });
  await t.checker.tick();
  t.setUp(false);
  await t.step(10_000);
  await t.step(10_000);
  assert.equal(w.status, "ready", "two failures are not enough");
  await t.step(10_000);
  assert.equal(w.status, "not_ready");
  t.setUp(true);
  await t.step(10_000);
  assert.equal(w.status, "not_ready", "one success is not enough");
  await t.step(10_000);
  assert.equal(w.status, "ready");
});

Deno.test("health: probes wait for the interval", async () => {
  const t = setup({ intervalSecs: 60 });
  t.manager.add({ url: "http://w1", models: ["m"] });
  await t.checker.tick();
  const n = t.paths.length;
  await t.step(59_000);
  assert.equal(t.paths.length, n, "not due yet");
  await t.step(1_000);
  assert.equal(t.paths.length, n + 1);
});

Deno.test("health: a worker that never answers fails at the start-up timeout, and recovers later", async () => {
  const t = setup({ startupTimeoutSecs: 100, startupCheckIntervalSecs: 30, successThreshold: 2 });
  t.setUp(false);
  const w = t.manager.add({ url: "http://w1", models: ["m"] });
  await t.checker.tick();
  await t.step(30_000);
  await t.step(30_000);
  assert.equal(w.status, "pending");
  await t.step(45_000);
  assert.equal(w.status, "failed");
  t.setUp(true);
  await t.step(60_000);
  await t.step(60_000);
  assert.equal(w.status, "ready", "a failed worker keeps being probed and comes back");
});

Deno.test("health: with probes off a worker is activated once and never probed", async () => {
  const t = setup({ disabled: true });
  const w = t.manager.add({ url: "http://w1" });
  await t.checker.tick();
  assert.equal(w.status, "ready");
  assert.deepEqual(w.models, ["llama"]);
  await t.step(1_000_000);
  assert.deepEqual(t.paths, ["/v1/models", "/get_server_info"]);
});

Deno.test("health: a draining worker is not probed", async () => {
  const t = setup();
  const w = t.manager.add({ url: "http://w1", models: ["m"] });
  await t.checker.tick();
  w.setStatus("draining");
  const n = t.paths.length;
  await t.step(1_000_000);
  assert.equal(t.paths.length, n);
});

Deno.test("health: the loop sleeps on the clock until a probe falls due, wakes on poke, and ends on abort", async () => {
  const t = setup({ intervalSecs: 10 });
  const probes = () => t.paths.filter((p) => p === "/health").length;
  const w = t.manager.add({ url: "http://w1", models: ["m"] });
  const stop = new AbortController();
  const loop = t.checker.run(stop.signal);
  await timerSet(t.clock, "the first pass");
  assert.equal(w.status, "ready", "probed at once");
  assert.equal(probes(), 1);
  for (let s = 1; s < 10; s++) {
    t.clock.advance(1000); // the loop looks every second at most
    await timerSet(t.clock, `the pass at ${s} s`);
  }
  assert.equal(probes(), 1, "not due before the interval");
  t.clock.advance(1000);
  await timerSet(t.clock, "the pass at 10 s");
  assert.equal(probes(), 2);
  const w2 = t.manager.add({ url: "http://w2", models: ["m"] });
  t.checker.poke(); // what the gateway's onAdded does: probed without waiting for the clock
  await timerSet(t.clock, "the pass after the poke");
  assert.equal(w2.status, "ready");
  assert.equal(t.clock.now(), 10_000);
  stop.abort();
  await loop;
  assert.equal(t.clock.pending, 0, "its timer cancelled");
});
