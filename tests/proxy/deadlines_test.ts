/**
 * Request deadlines on one shared timer, driven by a FakeClock: a sweep aborts exactly the
 * requests past their deadline, each once; a finished request's deadline never fires; the
 * timer runs while something is registered and stops at the first sweep that finds the set
 * empty (or at stop()), which `FakeClock.pending` shows. One test runs on the system clock with
 * the op sanitizer on (Deno 2.9 turned it off by default): a timer left running would fail it.
 */

import assert from "node:assert/strict";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { type DeadlineEntry, Deadlines } from "../../lib/proxy/deadlines.ts";

/** `Deno.test` with the op and resource sanitizers on whatever the CLI says. */
function test(name: string, fn: () => void | Promise<void>): void {
  Deno.test({ name, fn, sanitizeOps: true, sanitizeResources: true });
}

/** A tick long enough that the timer never fires while a test advances the clock. */
const NEVER = 3_600_000;

test("deadlines: sweep expires only the deadlines that have passed", () => {
  const clock = new FakeClock(1000);
  const d = new Deadlines(clock, NEVER);
  const fired: string[] = [];
  const a = d.add(1100, () => fired.push("a"));
  d.add(1200, () => fired.push("b"));
  const c = d.add(1500, () => fired.push("c"));
  assert.equal(d.size, 3);

  d.sweep();
  assert.deepEqual(fired, [], "nothing is due yet");

  clock.advance(150); // 1150
  d.sweep();
  assert.deepEqual(fired, ["a"]);
  assert.equal(d.size, 2);

  clock.advance(50); // 1200: exactly on b's deadline
  d.sweep();
  assert.deepEqual(fired, ["a", "b"], "a deadline equal to now has passed");

  d.remove(a); // already expired: a no-op
  assert.equal(d.size, 1);
  d.remove(c);
  assert.equal(d.size, 0);
  d.sweep(); // finds the set empty: the timer stops
});

test("deadlines: each deadline expires once, however often the sweep runs", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, NEVER);
  let n = 0;
  d.add(10, () => n++);
  clock.advance(20);
  d.sweep();
  d.sweep();
  clock.advance(1000);
  d.sweep();
  assert.equal(n, 1);
  assert.equal(d.size, 0);
});

test("deadlines: a removed deadline never expires", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, NEVER);
  const fired: string[] = [];
  const done = d.add(10, () => fired.push("done"));
  d.add(10, () => fired.push("slow"));
  d.remove(done);
  clock.advance(100);
  d.sweep();
  assert.deepEqual(fired, ["slow"]);
  assert.equal(d.size, 0);
});

test("deadlines: removing the same entry twice is harmless", () => {
  const d = new Deadlines(new FakeClock(0), NEVER);
  const e = d.add(10, () => assert.fail("removed deadline fired"));
  d.remove(e);
  d.remove(e);
  assert.equal(d.size, 0);
  d.stop();
});

test("deadlines: the timer restarts when a deadline is added after it stopped", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, NEVER);
  const fired: number[] = [];
  d.add(5, () => fired.push(1));
  assert.equal(clock.pending, 1, "the first deadline starts the timer");
  clock.advance(5);
  d.sweep(); // empties the set: the timer stops
  assert.equal(d.size, 0);
  assert.equal(clock.pending, 0);
  const e = d.add(50, () => fired.push(2));
  assert.equal(d.size, 1);
  assert.equal(clock.pending, 1, "started again");
  d.remove(e);
  d.sweep(); // finds it empty and stops
  assert.equal(clock.pending, 0);
  assert.deepEqual(fired, [1]);
});

test("deadlines: the shared timer sweeps on its own, every tick, while something is registered", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, 5);
  const fired: string[] = [];
  d.add(12, () => fired.push(`a@${clock.now()}`));
  const notYet = d.add(1_000_000, () => fired.push("fired too early"));
  clock.advance(14);
  assert.deepEqual(fired, [], "the sweeps at 5 and 10 found nothing due");
  clock.advance(1);
  assert.deepEqual(fired, ["a@15"], "the sweep at 15 did, without anyone calling sweep()");
  assert.equal(d.size, 1);
  assert.equal(clock.pending, 1, "the timer goes on for what is left");
  d.remove(notYet);
  assert.equal(d.size, 0);
  d.stop();
  assert.equal(clock.pending, 0);
});

test("deadlines: an expire callback may remove a later entry during the sweep", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, NEVER);
  const fired: string[] = [];
  const later: DeadlineEntry[] = [];
  d.add(1, () => {
    fired.push("first");
    for (const e of later) d.remove(e);
  });
  later.push(d.add(2, () => fired.push("second")));
  clock.advance(5);
  d.sweep();
  assert.deepEqual(fired, ["first"], "the removed entry does not fire in the same sweep");
  assert.equal(d.size, 0);
});

test("deadlines: a removal alone keeps the timer until the next sweep finds nothing", () => {
  const clock = new FakeClock(0);
  const d = new Deadlines(clock, 1);
  d.remove(d.add(1_000_000, () => assert.fail("removed deadline fired")));
  assert.equal(clock.pending, 1, "still armed after the last removal");
  clock.advance(1); // its next tick sees an empty set and stops it
  assert.equal(clock.pending, 0);
  assert.equal(d.size, 0);
});

test("deadlines: on the system clock, the timer fires, sweeps, and stops once the set is empty", async () => {
  const d = new Deadlines(systemClock, 1);
  const fired = Promise.withResolvers<void>();
  d.add(systemClock.now(), () => fired.resolve());
  await fired.promise; // expired by the timer; its sweep found the set empty and stopped it
  assert.equal(d.size, 0);
  // The op sanitizer fails this test if a timer is still set.
});
