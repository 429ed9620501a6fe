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
    {
      maxConcurrentRequests: 2,
      queueSize: 3,
      queueTimeoutSecs: 60,
      rateLimitTokensPerSecond: null,
      ...cfg,
    },
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

// --rate-limit-tokens-per-second: SMG's refill of the bucket whose capacity is
// --max-concurrent-requests.

Deno.test("admission refill: without it the bucket never refills however long one waits", () => {
  for (const rate of [null, 0]) {
    const { a, clock } = admission({
      maxConcurrentRequests: 2,
      queueSize: 0,
      rateLimitTokensPerSecond: rate,
    });
    now(a.acquire());
    now(a.acquire());
    clock.advance(3_600_000);
    assert.throws(() => a.acquire(), { status: 429, code: "admission_queue_full" });
  }
});

Deno.test("admission refill: a burst of the capacity, then the refill rate, tokens still held", async () => {
  const { a, clock, metrics } = admission({
    maxConcurrentRequests: 4,
    queueSize: 0,
    rateLimitTokensPerSecond: 2,
  });
  for (let i = 0; i < 4; i++) now(a.acquire());
  assert.throws(() => a.acquire(), { status: 429 });
  // Nothing was released: only the refill admits, one token every 500 ms.
  clock.advance(499);
  assert.throws(() => a.acquire(), { status: 429 });
  clock.advance(1);
  now(a.acquire());
  assert.throws(() => a.acquire(), { status: 429 });
  clock.advance(10_000);
  // Ten seconds refill 20 tokens, but the bucket holds at most its capacity.
  assert.equal(a.available, 4);
  for (let i = 0; i < 4; i++) now(a.acquire());
  assert.throws(() => a.acquire(), { status: 429 });
  assert.equal(a.inUse, 9, "with refill, more than the capacity may be in flight");
  const text = await metrics.render();
  assert.equal(
    metricLine(text, 'smg_http_rate_limit_total{result="allowed"}'),
    'smg_http_rate_limit_total{result="allowed"} 9',
  );
  assert.equal(
    metricLine(text, 'smg_http_rate_limit_total{result="rejected"}'),
    'smg_http_rate_limit_total{result="rejected"} 4',
  );
  assert.equal(metricLine(text, "smg_admission_inflight "), "smg_admission_inflight 9");
});

Deno.test("admission refill: a released token goes back, but never above the capacity", () => {
  const { a, clock } = admission({
    maxConcurrentRequests: 2,
    queueSize: 0,
    rateLimitTokensPerSecond: 1,
  });
  const r1 = now(a.acquire());
  const r2 = now(a.acquire());
  clock.advance(5000); // refilled to the capacity while both are held
  assert.equal(a.available, 2);
  r1();
  r2();
  assert.equal(a.available, 2);
  now(a.acquire());
  now(a.acquire());
  assert.throws(() => a.acquire(), { status: 429 });
});

Deno.test("admission refill: waiters get refilled tokens in FIFO order, each when it drips in", async () => {
  const { a, clock } = admission({
    maxConcurrentRequests: 1,
    queueSize: 5,
    rateLimitTokensPerSecond: 4,
  });
  now(a.acquire());
  const order: number[] = [];
  const waits = [0, 1, 2].map((i) => queued(a.acquire()).then((r) => (order.push(i), r)));
  clock.advance(249);
  await Promise.resolve();
  assert.equal(order.length, 0);
  clock.advance(1);
  await waits[0];
  assert.deepEqual(order, [0]);
  // A newcomer queues behind the two still waiting, though a token may drip in meanwhile.
  const late = queued(a.acquire()).then((r) => (order.push(3), r));
  clock.advance(750);
  await Promise.all([...waits, late]);
  assert.deepEqual(order, [0, 1, 2, 3]);
  assert.equal(a.waiting, 0);
  assert.equal(clock.pending, 0, "no refill timer and no queue timeout left behind");
});

Deno.test("admission refill: a waiter the refill does not reach in time gets 503", async () => {
  const { a, clock } = admission({
    maxConcurrentRequests: 1,
    queueSize: 5,
    queueTimeoutSecs: 3,
    rateLimitTokensPerSecond: 1,
  });
  now(a.acquire());
  const first = queued(a.acquire());
  clock.advance(500);
  const second = queued(a.acquire());
  const third = queued(a.acquire());
  clock.advance(500);
  await first; // the first refilled token, a second in
  clock.advance(1000);
  await second; // the next, a second later
  clock.advance(999);
  assert.equal(a.waiting, 1, "the third waits on: its token is due at 3 s, its timeout at 3.5 s");
  clock.advance(1);
  await third;
  // Four more at 3.5 s, with a 3 s timeout and a token a second (at 4, 5 and 6 s): the last
  // would get its token at 7 s.
  clock.advance(500);
  const more = [0, 1, 2, 3].map(() => queued(a.acquire()));
  clock.advance(3000);
  const outcomes = await Promise.allSettled(more);
  assert.deepEqual(outcomes.slice(0, 3).map((o) => o.status), [
    "fulfilled",
    "fulfilled",
    "fulfilled",
  ]);
  const last = outcomes[3];
  assert.ok(last.status === "rejected" && last.reason instanceof GatewayError);
  assert.equal(last.reason.status, 503);
  assert.equal(last.reason.code, "admission_queue_timeout");
  assert.equal(a.waiting, 0);
});
