import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import {
  BREAKER_GAUGE,
  type BreakerOptions,
  type BreakerState,
  CircuitBreaker,
} from "../../lib/workers/circuit_breaker.ts";
import { classifyStatus } from "../../lib/workers/failures.ts";

const OPTS: BreakerOptions = {
  failureThreshold: 3,
  successThreshold: 2,
  openMs: 1000,
  windowMs: 5000,
  disabled: false,
};

function breaker(o: Partial<BreakerOptions> = {}) {
  const transitions: [BreakerState, BreakerState][] = [];
  const cb = new CircuitBreaker({ ...OPTS, ...o }, (from, to) => transitions.push([from, to]));
  return { cb, transitions, clock: new FakeClock(0) };
}

Deno.test("breaker: opens after N consecutive failures, not before", () => {
  const { cb, transitions, clock } = breaker();
  cb.record("failure", clock.now());
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "closed");
  assert.equal(cb.allows(clock.now()), true);
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "open");
  assert.equal(cb.allows(clock.now()), false);
  assert.deepEqual(transitions, [["closed", "open"]]);
});

Deno.test("breaker: a success between failures restarts the count", () => {
  const { cb, clock } = breaker();
  for (const o of ["failure", "failure", "success", "failure", "failure"] as const) {
    cb.record(o, clock.now());
  }
  assert.equal(cb.state(clock.now()), "closed");
  assert.equal(cb.consecutiveFailures, 2);
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "open");
});

Deno.test("breaker: 429 and 408 neither open nor reset the failure count; other 4xx reset it", () => {
  const { cb, clock } = breaker();
  cb.record("failure", 0);
  cb.record("failure", 0);
  for (let i = 0; i < 20; i++) cb.record(classifyStatus(i % 2 ? 429 : 408), 0);
  assert.equal(cb.state(0), "closed");
  assert.equal(cb.consecutiveFailures, 2);
  cb.record(classifyStatus(404), clock.now());
  assert.equal(cb.consecutiveFailures, 0);
  cb.record("failure", 0);
  cb.record("failure", 0);
  assert.equal(cb.state(0), "closed");
});

Deno.test("breaker: open turns half-open lazily once openMs has passed", () => {
  const { cb, transitions, clock } = breaker();
  for (let i = 0; i < 3; i++) cb.record("failure", clock.now());
  clock.advance(999);
  assert.equal(cb.state(clock.now()), "open");
  assert.equal(cb.allows(clock.now()), false);
  clock.advance(1);
  // No transition is reported until someone looks.
  assert.deepEqual(transitions, [["closed", "open"]]);
  assert.equal(cb.allows(clock.now()), true);
  assert.equal(cb.state(clock.now()), "half_open");
  assert.deepEqual(transitions, [["closed", "open"], ["open", "half_open"]]);
});

Deno.test("breaker: half-open closes after M consecutive successes", () => {
  const { cb, transitions, clock } = breaker({ successThreshold: 3 });
  for (let i = 0; i < 3; i++) cb.record("failure", clock.now());
  clock.advance(1000);
  cb.record("success", clock.now());
  cb.record("success", clock.now());
  assert.equal(cb.state(clock.now()), "half_open");
  cb.record("success", clock.now());
  assert.equal(cb.state(clock.now()), "closed");
  assert.equal(cb.consecutiveFailures, 0);
  assert.deepEqual(transitions, [
    ["closed", "open"],
    ["open", "half_open"],
    ["half_open", "closed"],
  ]);
  // Closed again means a full N failures are needed to reopen.
  cb.record("failure", clock.now());
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "closed");
});

Deno.test("breaker: successes recorded while open do not count towards closing", () => {
  const { cb, clock } = breaker({ successThreshold: 2 });
  for (let i = 0; i < 3; i++) cb.record("failure", clock.now());
  cb.record("success", clock.now()); // a late answer from before the breaker opened
  cb.record("success", clock.now());
  clock.advance(1000);
  assert.equal(cb.state(clock.now()), "half_open");
  cb.record("success", clock.now());
  assert.equal(cb.state(clock.now()), "half_open");
  cb.record("success", clock.now());
  assert.equal(cb.state(clock.now()), "closed");
});

Deno.test("breaker: any failure while half-open reopens for another openMs", () => {
  const { cb, transitions, clock } = breaker({ successThreshold: 3 });
  for (let i = 0; i < 3; i++) cb.record("failure", clock.now());
  clock.advance(1000);
  cb.record("success", clock.now());
  cb.record("success", clock.now());
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "open");
  assert.deepEqual(transitions.at(-1), ["half_open", "open"]);
  clock.advance(999);
  assert.equal(cb.allows(clock.now()), false);
  clock.advance(1);
  assert.equal(cb.state(clock.now()), "half_open");
  // The earlier half-open successes were forgotten.
  cb.record("success", clock.now());
  cb.record("success", clock.now());
  assert.equal(cb.state(clock.now()), "half_open");
});

Deno.test("breaker: failures further apart than windowMs do not add up", () => {
  const { cb, clock } = breaker({ failureThreshold: 3, windowMs: 5000 });
  for (let i = 0; i < 10; i++) {
    cb.record("failure", clock.now());
    clock.advance(5001);
  }
  assert.equal(cb.state(clock.now()), "closed");
  assert.equal(cb.consecutiveFailures, 1);
});

Deno.test("breaker: failures exactly windowMs apart still add up", () => {
  const { cb, clock } = breaker({ failureThreshold: 3, windowMs: 5000 });
  cb.record("failure", clock.now());
  clock.advance(5000);
  cb.record("failure", clock.now());
  clock.advance(5000);
  cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "open");
});

Deno.test("breaker: disabled never opens but still counts", () => {
  const { cb, transitions, clock } = breaker({ disabled: true });
  for (let i = 0; i < 50; i++) cb.record("failure", clock.now());
  assert.equal(cb.state(clock.now()), "closed");
  assert.equal(cb.allows(clock.now()), true);
  assert.equal(cb.consecutiveFailures, 50);
  assert.deepEqual(transitions, []);
});

Deno.test("breaker: gauge values are SMG's", () => {
  assert.deepEqual(BREAKER_GAUGE, { closed: 0, open: 1, half_open: 2 });
});
