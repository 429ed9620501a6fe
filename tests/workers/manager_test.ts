/**
 * Worker specs from `POST /workers` and the drain-then-remove lifecycle.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import { parseWorkerSpec } from "../../lib/workers/manager.ts";
import { DuplicateWorkerError } from "../../lib/workers/registry.ts";
import { until } from "../../support/wait.ts";
import { workerSetup } from "../support/workers.ts";

Deno.test("parseWorkerSpec: SMG's snake_case spec", () => {
  const s = parseWorkerSpec({
    url: "http://10.0.0.1:8000/",
    models: [{ id: "llama" }, "qwen"],
    worker_type: "prefill",
    bootstrap_port: 9001,
    labels: { policy: "round_robin" },
    api_key: "k",
    health: { disable_health_check: true },
  });
  assert.equal(s.url, "http://10.0.0.1:8000");
  assert.deepEqual(s.models, ["llama", "qwen"]);
  assert.equal(s.workerType, "prefill");
  assert.equal(s.bootstrapPort, 9001);
  assert.equal(s.apiKey, "k");
  assert.equal(s.disableHealthCheck, true);
  assert.deepEqual(parseWorkerSpec({ url: "http://h:1", model_id: "x" }).models, ["x"]);
});

Deno.test("parseWorkerSpec: connection_mode picks the protocol of a URL without one", () => {
  const url = (u: string, connection_mode?: string) =>
    parseWorkerSpec({ url: u, connection_mode }).url;
  assert.equal(url("10.0.0.1:50051", "grpc"), "grpc://10.0.0.1:50051");
  assert.equal(url("10.0.0.1:8000", "http"), "http://10.0.0.1:8000");
  assert.equal(url("http://10.0.0.1:50051", "grpc"), "grpc://10.0.0.1:50051");
  assert.equal(url("https://h:50051", "grpc"), "grpcs://h:50051");
  assert.equal(url("grpc://h:50051", "grpc"), "grpc://h:50051");
  assert.equal(url("grpc://h:50051"), "grpc://h:50051", "the scheme decides without it");
});

Deno.test("parseWorkerSpec: bad specs are 400s naming the field", () => {
  const cases: [unknown, string | null][] = [
    [null, null],
    [{}, "url"],
    [{ url: "ftp://x" }, "url"],
    [{ url: "http://h:1", models: "x" }, "models"],
    [{ url: "http://h:1", models: [{ name: "x" }] }, "models"],
    [{ url: "http://h:1", worker_type: "encode" }, "worker_type"],
    [{ url: "http://h:1", labels: { a: 1 } }, "labels"],
    [{ url: "http://h:1", priority: "high" }, "priority"],
    [{ url: "h:1", connection_mode: "zmq" }, "connection_mode"],
    [{ url: "grpc://h:1", connection_mode: "http" }, "connection_mode"],
    [{ url: "http://h:1/v1", connection_mode: "grpc" }, "url"],
  ];
  for (const [body, param] of cases) {
    assert.throws(() => parseWorkerSpec(body), (e: unknown) => {
      return e instanceof GatewayError && e.status === 400 && e.param === param;
    }, JSON.stringify(body));
  }
});

function manager(drainSettleSecs: number, clock = new FakeClock()) {
  const removed: string[] = [];
  const { registry, manager: m } = workerSetup(clock, {
    health: { ...defaultConfig().health, drainSettleSecs },
  });
  registry.subscribe((e) => {
    if (e.kind === "removed") removed.push(e.worker.url);
  });
  /** Resolves once the registry holds `n` workers. */
  const size = (n: number) =>
    until(() => registry.size === n, (l) => registry.subscribe(l), `${n} workers left`);
  return { registry, m, removed, size };
}

Deno.test("manager: the same URL twice is refused", () => {
  const { m } = manager(0);
  m.add({ url: "http://a" });
  assert.throws(() => m.add({ url: "http://a" }), DuplicateWorkerError);
});

Deno.test("manager: removal drains a busy worker first, then removes it when its last request ends", async () => {
  const { registry, m, removed, size } = manager(5);
  const w = m.add({ url: "http://a" });
  w.setStatus("ready");
  w.ownInFlight = 2;
  assert.equal(m.remove(w.id), true);
  assert.equal(w.status, "draining");
  assert.equal(w.available(0), false, "no new requests while draining");
  w.ownInFlight = 1;
  assert.equal(registry.size, 1, "still there while a request is in flight");
  w.ownInFlight = 0;
  await size(0);
  assert.deepEqual(removed, ["http://a"]);
  assert.equal(m.remove("nope"), false);
  await m.stop();
});

Deno.test("manager: a worker still busy when the settle time runs out is removed anyway", async () => {
  const clock = new FakeClock();
  const { registry, m, size } = manager(5, clock);
  const w = m.add({ url: "http://a" });
  w.setStatus("ready");
  w.ownInFlight = 1;
  m.remove(w.id);
  clock.advance(4999);
  assert.equal(registry.size, 1, "the settle time has not run out"); // its timer has not fired
  clock.advance(1);
  await size(0);
  assert.equal(w.inFlight, 1);
  await m.stop();
});

Deno.test("manager: shutdown removes a draining worker at once", async () => {
  const { registry, m } = manager(5);
  const w = m.add({ url: "http://a" });
  w.setStatus("ready");
  w.ownInFlight = 1;
  m.remove(w.id);
  await m.stop();
  assert.equal(registry.size, 0);
});

Deno.test("manager: a worker that was never ready is removed at once", async () => {
  const { registry, m } = manager(5);
  const w = m.add({ url: "http://a" });
  m.remove(w.id);
  await m.stop();
  assert.equal(registry.size, 0);
});
