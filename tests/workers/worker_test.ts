import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import type { WorkerStatus } from "../../lib/core/types.ts";
import { CircuitBreaker } from "../../lib/workers/circuit_breaker.ts";
import { parseLoads } from "../../lib/workers/load_report.ts";
import { Worker, type WorkerSpec } from "../../lib/workers/worker.ts";

function worker(spec: Partial<WorkerSpec> = {}, status: WorkerStatus = "ready") {
  const breaker = new CircuitBreaker({
    failureThreshold: 2,
    successThreshold: 1,
    openMs: 1000,
    windowMs: 60_000,
    disabled: false,
  });
  return new Worker("w-1", { url: "http://a:8000", ...spec }, breaker, status, 0);
}

Deno.test("worker: info() never carries the API key", () => {
  const w = worker({ apiKey: "sk-very-secret", models: ["m"], labels: { team: "x" } });
  w.load = parseLoads({ loads: [{ num_running_reqs: 1, token_usage: 0.5 }] });
  const json = JSON.stringify(w.info(0));
  assert.ok(!json.includes("sk-very-secret"), json);
  assert.ok(!/api_?key/i.test(json), json);
  // It is still there for the proxy to send.
  assert.equal(w.apiKey, "sk-very-secret");
});

Deno.test("worker: info() shows status, models, breaker and load in SMG's fields", () => {
  const w = worker({ models: ["m1", "m2"], priority: 10 });
  w.ownInFlight = 3;
  const clock = new FakeClock();
  w.breaker.record("failure", clock.now());
  w.breaker.record("failure", clock.now());
  const info = w.info(clock.now());
  assert.equal(info.id, "w-1");
  assert.equal(info.url, "http://a:8000");
  assert.equal(info.model_id, "m1");
  assert.deepEqual(info.models, [{ id: "m1" }, { id: "m2" }]);
  assert.equal(info.worker_type, "regular");
  assert.equal(info.is_healthy, true);
  assert.equal(info.load, 3);
  assert.equal(info.priority, 10);
  assert.deepEqual(info.circuit_breaker, {
    state: "open",
    state_code: 1,
    consecutive_failures: 2,
  });
  assert.equal(info.load_report, undefined);
  w.setStatus("not_ready");
  assert.equal(w.info(0).is_healthy, false);
  assert.equal(w.info(0).status, "not_ready");
});

Deno.test("worker: serves() any model when its models are unknown", () => {
  const known = worker({ models: ["a", "b"] });
  const unknown = worker({ models: [] });
  const table: [Worker, string | null, boolean][] = [
    [known, "a", true],
    [known, "b", true],
    [known, "c", false],
    [known, null, true],
    [unknown, "anything", true],
    [unknown, null, true],
  ];
  for (const [w, model, want] of table) assert.equal(w.serves(model), want, `${w.models} ${model}`);
  assert.equal(unknown.models, null);
});

Deno.test("worker: available() only when ready, not vetoed and breaker not open", () => {
  const clock = new FakeClock();
  for (const s of ["pending", "not_ready", "failed", "draining"] as const) {
    assert.equal(worker({}, s).available(0), false, s);
  }
  const w = worker();
  assert.equal(w.available(clock.now()), true);
  w.overloaded = true;
  assert.equal(w.available(clock.now()), false);
  w.overloaded = false;
  w.breaker.record("failure", clock.now());
  w.breaker.record("failure", clock.now());
  assert.equal(w.available(clock.now()), false);
  clock.advance(1000); // half-open lets traffic through
  assert.equal(w.available(clock.now()), true);
});

Deno.test("worker: setStatus reports changes only", () => {
  const seen: string[] = [];
  const w = new Worker(
    "w",
    { url: "http://a" },
    new CircuitBreaker({
      failureThreshold: 1,
      successThreshold: 1,
      openMs: 1,
      windowMs: 1,
      disabled: false,
    }),
    "pending",
    0,
    (_w, from, to) => seen.push(`${from}->${to}`),
  );
  w.setStatus("pending");
  w.setStatus("ready");
  w.setStatus("ready");
  w.setStatus("draining");
  assert.deepEqual(seen, ["pending->ready", "ready->draining"]);
  assert.equal(w.status, "draining");
});

Deno.test("worker: spec defaults", () => {
  const w = worker();
  assert.equal(w.type, "regular");
  assert.equal(w.priority, 50);
  assert.equal(w.cost, 1);
  assert.equal(w.apiKey, null);
  assert.equal(w.models, null);
  assert.equal(w.healthCheckDisabled, false);
});

Deno.test("worker: idle() resolves when the last request in flight ends, at once when none is", async () => {
  const w = worker();
  await w.idle();
  w.ownInFlight++;
  w.ownInFlight++;
  let idle = false;
  const p = w.idle().then(() => (idle = true));
  assert.equal(w.idle(), w.idle(), "one promise for every waiter");
  w.ownInFlight--;
  await Promise.resolve();
  assert.equal(idle, false, "one request still in flight");
  w.ownInFlight--;
  await p;
  assert.equal(idle, true);
});

Deno.test("worker: peers' load adds to what policies read; its own drains and recent work decay", () => {
  const w = worker();
  w.ownInFlight = 2;
  w.chargePrefill(300, 1_000);
  w.peerInFlight = 3;
  w.peerPrefillTokens = 700;
  assert.equal(w.inFlight, 5);
  assert.equal(w.prefillTokens, 1_000);
  assert.equal(w.ownInFlight, 2, "the ledger's count is its own");
  // Recent work: e^(−age/30 s), the peers' from when they told.
  assert.equal(w.ownRecentWork(1_000), 300);
  assert.ok(Math.abs(w.ownRecentWork(31_000) - 300 / Math.E) < 1e-9);
  w.peerRecentWork = 600;
  w.peerRecentWorkAt = 31_000;
  assert.ok(Math.abs(w.recentWork(31_000) - (300 / Math.E + 600)) < 1e-9);
  w.chargePrefill(100); // no time given: the backlog only
  assert.ok(Math.abs(w.ownRecentWork(31_000) - 300 / Math.E) < 1e-9);
});
