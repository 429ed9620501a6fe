import assert from "node:assert/strict";
import type { AdmissionConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { Admission, type Release } from "../../lib/proxy/admission.ts";
import { Cancel } from "../../lib/core/cancel.ts";

function admission(cfg: Partial<AdmissionConfig> = {}) {
  const metrics = new Metrics();
  const clock = new FakeClock();
  const a = new Admission(
    { maxConcurrentRequests: 2, queueSize: 3, queueTimeoutSecs: 60, ...cfg },
    metrics,
    clock,
  );
  return { a, metrics, clock };
}

/** A slot granted at once; fails the test when the limiter made the caller wait. */
function now(slot: Release | Promise<Release>): Release {
  assert.ok(!(slot instanceof Promise), "expected an immediate slot");
  return slot;
}

/** A queued acquire; fails the test when it was granted at once. */
function queued(slot: Release | Promise<Release>): Promise<Release> {
  assert.ok(slot instanceof Promise, "expected to wait");
  return slot;
}

async function rejection(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof GatewayError, `expected a GatewayError, got ${e}`);
    return e;
  }
  assert.fail("expected the wait to fail");
}

function metricLine(text: string, prefix: string): string | undefined {
  return text.split("\n").find((l) => l.startsWith(prefix));
}

Deno.test("admission: -1 means no limit", () => {
  const { a } = admission({ maxConcurrentRequests: -1, queueSize: 0 });
  for (let i = 0; i < 1000; i++) now(a.acquire());
  assert.equal(a.waiting, 0);
});

Deno.test("admission: grants at once under the cap and counts slots", () => {
  const { a } = admission();
  const r1 = now(a.acquire());
  const r2 = now(a.acquire());
  assert.equal(a.inUse, 2);
  r1();
  assert.equal(a.inUse, 1);
  r2();
  assert.equal(a.inUse, 0);
});

Deno.test("admission: waiters get slots in FIFO order as slots are released", async () => {
  const { a, clock } = admission({ maxConcurrentRequests: 1, queueSize: 5 });
  const first = now(a.acquire());
  const order: number[] = [];
  const waits = [0, 1, 2].map((i) =>
    queued(a.acquire()).then((r) => {
      order.push(i);
      return r;
    })
  );
  assert.equal(a.waiting, 3);
  first();
  const r0 = await waits[0];
  assert.deepEqual(order, [0]);
  assert.equal(a.inUse, 1);
  r0();
  const r1 = await waits[1];
  r1();
  const r2 = await waits[2];
  assert.deepEqual(order, [0, 1, 2]);
  assert.equal(a.waiting, 0);
  assert.equal(clock.pending, 0, "a granted waiter's timeout is cancelled");
  r2();
  assert.equal(a.inUse, 0);
});

Deno.test("admission: a newcomer does not overtake the queue", async () => {
  const { a } = admission({ maxConcurrentRequests: 1, queueSize: 5 });
  const first = now(a.acquire());
  const waiter = queued(a.acquire());
  first();
  // The released slot went to the waiter, so the newcomer waits behind it.
  const late = queued(a.acquire());
  (await waiter)();
  (await late)();
  assert.equal(a.inUse, 0);
});

Deno.test("admission: a full queue answers 429 admission_queue_full with Retry-After 2", async () => {
  const { a, metrics } = admission({ maxConcurrentRequests: 1, queueSize: 2 });
  const held = now(a.acquire());
  const w1 = queued(a.acquire());
  const w2 = queued(a.acquire());
  assert.throws(() => a.acquire(), (e) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.status, 429);
    assert.equal(e.code, "admission_queue_full");
    assert.equal(e.retryAfter, 2);
    return true;
  });
  assert.equal(a.waiting, 2);
  const text = await metrics.render();
  assert.equal(
    metricLine(text, 'smg_admission_queue_rejected_total{reason="full"}'),
    'smg_admission_queue_rejected_total{reason="full"} 1',
  );
  held();
  (await w1)();
  (await w2)();
});

Deno.test("admission: queue size 0 rejects as soon as the slots are taken", () => {
  const { a } = admission({ maxConcurrentRequests: 1, queueSize: 0 });
  const held = now(a.acquire());
  assert.throws(() => a.acquire(), { status: 429, code: "admission_queue_full" });
  held();
  now(a.acquire())();
});

Deno.test("admission: a wait past the timeout answers 503 admission_queue_timeout", async () => {
  const { a, metrics, clock } = admission({
    maxConcurrentRequests: 1,
    queueSize: 2,
    queueTimeoutSecs: 20,
  });
  const held = now(a.acquire());
  const waiting = queued(a.acquire());
  clock.advance(19_999);
  assert.equal(a.waiting, 1, "still waiting just before the timeout");
  clock.advance(1);
  const err = await rejection(waiting);
  assert.equal(err.status, 503);
  assert.equal(err.code, "admission_queue_timeout");
  assert.equal(err.retryAfter, 2);
  assert.equal(a.waiting, 0);
  const text = await metrics.render();
  assert.equal(
    metricLine(text, 'smg_admission_queue_rejected_total{reason="timeout"}'),
    'smg_admission_queue_rejected_total{reason="timeout"} 1',
  );
  // The timed-out waiter does not get the slot later.
  held();
  assert.equal(a.inUse, 0);
});

Deno.test("admission: an aborted waiter leaves the queue and does not take a slot", async () => {
  const { a } = admission({ maxConcurrentRequests: 1, queueSize: 2 });
  const held = now(a.acquire());
  const ac = new Cancel();
  const gone = queued(a.acquire(ac));
  const next = queued(a.acquire());
  assert.equal(a.waiting, 2);
  ac.cancel(new Error("client gone"));
  const err = await rejection(gone);
  assert.equal(err.status, 499);
  assert.equal(a.waiting, 1);
  held();
  const r = await next;
  assert.equal(a.inUse, 1);
  r();
  assert.equal(a.inUse, 0);
});

Deno.test({
  name: "admission: a request whose signal already aborted is not queued",
  fn: async () => {
    const { a } = admission({ maxConcurrentRequests: 1, queueSize: 1 });
    const held = now(a.acquire());
    const ac = new Cancel();
    ac.cancel(new Error("client gone"));
    let outcome: string;
    let waitingAfter = -1;
    try {
      const dead = a.acquire(ac);
      waitingAfter = a.waiting;
      held();
      // Settle it either way so no timer outlives the test.
      outcome = dead instanceof Promise
        ? await dead.then((r) => (r(), "granted"), (e) => `rejected ${e.status}`)
        : (dead(), "granted");
    } catch (e) {
      waitingAfter = a.waiting;
      held();
      outcome = `rejected ${(e as { status: number }).status}`;
    }
    assert.equal(waitingAfter, 0);
    assert.equal(outcome, "rejected 499");
  },
});

Deno.test("admission: release is idempotent", async () => {
  const { a } = admission({ maxConcurrentRequests: 1, queueSize: 2 });
  const r = now(a.acquire());
  const waiter = queued(a.acquire());
  r();
  r();
  r();
  assert.equal(a.inUse, 1);
  const w = await waiter;
  assert.equal(a.inUse, 1);
  w();
  w();
  assert.equal(a.inUse, 0);
  // A double release does not leave a phantom free slot behind.
  const again = now(a.acquire());
  const behind = queued(a.acquire());
  assert.equal(a.waiting, 1);
  assert.equal(a.inUse, 1);
  again();
  (await behind)();
});

Deno.test("admission: gauges follow slots and waiters", async () => {
  const { a, metrics } = admission({ maxConcurrentRequests: 1, queueSize: 2 });
  const held = now(a.acquire());
  const w = queued(a.acquire());
  let text = await metrics.render();
  assert.equal(metricLine(text, "smg_admission_inflight "), "smg_admission_inflight 1");
  assert.equal(metricLine(text, "smg_admission_queue_depth "), "smg_admission_queue_depth 1");
  held();
  (await w)();
  text = await metrics.render();
  assert.equal(metricLine(text, "smg_admission_inflight "), "smg_admission_inflight 0");
  assert.equal(metricLine(text, "smg_admission_queue_depth "), "smg_admission_queue_depth 0");
});
