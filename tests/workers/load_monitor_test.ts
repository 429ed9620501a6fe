/**
 * The load monitor: the source fallback chain (/v1/loads → /get_load → /metrics), remembering
 * absent sources, the overload veto, clearing a veto when a report stops coming, and the loop's
 * interval on the clock.
 */

import assert from "node:assert/strict";
import { defaultConfig, type LoadMonitorConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { FetchFn } from "../../lib/workers/http.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";
import { LoadMonitor } from "../../lib/workers/load_monitor.ts";
import { WorkerRegistry } from "../../lib/workers/registry.ts";
import { timerSet } from "../../support/wait.ts";
import { workerSetup } from "../support/workers.ts";

type Routes = Record<string, () => Response>;

function setup(routes: Routes, cfg: Partial<LoadMonitorConfig> = {}) {
  const config = { ...defaultConfig().loadMonitor, ...cfg };
  const clock = new FakeClock(5);
  const registry = new WorkerRegistry();
  const hits: string[] = [];
  const fetchFn: FetchFn = (url) => {
    const path = new URL(url).pathname;
    hits.push(path);
    const r = routes[path];
    return r ? Promise.resolve(r()) : Promise.resolve(new Response("", { status: 404 }));
  };
  const { manager } = workerSetup(clock, { registry });
  const w = manager.add({ url: "http://w1", models: ["m"] });
  w.setStatus("ready");
  const monitor = new LoadMonitor({
    config,
    registry,
    control: httpWorkerControl(fetchFn),
    clock,
    log: silentLogger,
  });
  return { w, monitor, hits, routes, clock };
}

const loads = (waiting: number, usage: number) => () =>
  Response.json({
    loads: [{ num_running_reqs: 1, num_waiting_reqs: waiting, token_usage: usage }],
  });

Deno.test("load monitor: /v1/loads is used when the worker serves it", async () => {
  const t = setup({ "/v1/loads": loads(3, 0.5) });
  await t.monitor.pollOnce();
  assert.equal(t.w.load?.source, "loads");
  assert.equal(t.w.load?.waitingRequests, 3);
  assert.equal(t.w.loadAt, 5);
  assert.deepEqual(t.hits, ["/v1/loads"]);
});

Deno.test("load monitor: falls back to /get_load, then to Prometheus text, and remembers", async () => {
  const t = setup({
    "/metrics": () => new Response("sglang:token_usage 0.25\nsglang:num_queue_reqs 4\n"),
  });
  await t.monitor.pollOnce();
  assert.equal(t.w.load?.source, "metrics");
  assert.equal(t.w.load?.waitingRequests, 4);
  assert.deepEqual(t.hits, ["/v1/loads", "/get_load", "/metrics"]);
  await t.monitor.pollOnce();
  assert.deepEqual(t.hits.slice(3), ["/metrics"], "absent sources are not asked again");
});

Deno.test("load monitor: a transport error is inconclusive, not a verdict", async () => {
  let fail = true;
  const t = setup({
    "/v1/loads": () => fail ? new Response("boom", { status: 500 }) : loads(1, 0.1)(),
  });
  await t.monitor.pollOnce();
  assert.equal(t.w.load as unknown, null);
  fail = false;
  await t.monitor.pollOnce();
  assert.equal(t.w.load!.source as string, "loads", "5xx did not rule /v1/loads out");
});

Deno.test("load monitor: the overload veto follows the thresholds and clears without reports", async () => {
  let usage = 0.95;
  let serve = true;
  const t = setup({
    "/v1/loads": () => serve ? loads(0, usage)() : new Response("down", { status: 503 }),
  }, { overloadTokenUsage: 0.9 });
  await t.monitor.pollOnce();
  assert.equal(t.w.overloaded, true);
  assert.equal(t.w.available(0), false);
  usage = 0.5;
  await t.monitor.pollOnce();
  assert.equal(t.w.overloaded, false);
  usage = 0.99;
  await t.monitor.pollOnce();
  serve = false;
  await t.monitor.pollOnce();
  assert.equal(t.w.overloaded, false, "losing the load feed clears the veto");
});

Deno.test("load monitor: waiting-request threshold vetoes too; workers not ready are skipped", async () => {
  const t = setup({ "/v1/loads": loads(8, 0) }, { overloadWaitingRequests: 8 });
  await t.monitor.pollOnce();
  assert.equal(t.w.overloaded, true);
  t.w.setStatus("not_ready");
  const n = t.hits.length;
  await t.monitor.pollOnce();
  assert.equal(t.hits.length, n);
  assert.equal(t.w.overloaded, false);
});

Deno.test("load monitor: --disable-load-monitoring polls only when something needs loads", () => {
  const off = setup({}, { disabled: true });
  assert.equal(off.monitor.active, false);
  const veto = setup({}, { disabled: true, overloadWaitingRequests: 3 });
  assert.equal(veto.monitor.active, true);
  assert.equal(setup({}).monitor.active, true);
});

Deno.test("load monitor: the loop polls once per interval on the clock and ends on abort", async () => {
  const t = setup({ "/v1/loads": loads(3, 0.5) }, { intervalSecs: 5 });
  const stop = new AbortController();
  const loop = t.monitor.run(stop.signal);
  await timerSet(t.clock, "the first poll");
  assert.equal(t.hits.length, 1, "polled at once");
  t.clock.advance(4999);
  assert.equal(t.hits.length, 1, "not before the interval"); // its timer has not fired
  t.clock.advance(1);
  await timerSet(t.clock, "the second poll");
  assert.equal(t.hits.length, 2);
  stop.abort();
  await loop;
  assert.equal(t.clock.pending, 0);
});
