/**
 * Injectable time and randomness: the seeded generator is reproducible and in range, the fake
 * clock moves only when told and runs its timers in order, `sleep` rejects on abort, and `pause`
 * ends on timeout, wake or abort without ever rejecting. Timers are checked by the op sanitizer (turned on here because
 * Deno 2.9 no longer does by default), so every path must clear its timer.
 */

import assert from "node:assert/strict";
import {
  every,
  FakeClock,
  osRandom,
  pause,
  randomIndex,
  seededRandom,
  sleep,
  systemClock,
} from "../../lib/core/clock.ts";

/** `Deno.test` with the op and resource sanitizers on whatever the CLI says. */
function test(name: string, fn: () => void | Promise<void>): void {
  Deno.test({ name, fn, sanitizeOps: true, sanitizeResources: true });
}

/** Resolves true if `p` settles before the next macrotask, else false. */
async function settledNow(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(() => (settled = true), () => (settled = true));
  await new Promise<void>((r) => queueMicrotask(r));
  await Promise.resolve();
  return settled;
}

test("seededRandom: the same seed gives the same sequence", () => {
  const a = seededRandom(42);
  const b = seededRandom(42);
  const xs = Array.from({ length: 50 }, a);
  const ys = Array.from({ length: 50 }, b);
  assert.deepEqual(xs, ys);
  assert.equal(new Set(xs).size, 50, "the sequence does not repeat early");
});

test("seededRandom: different seeds give different sequences", () => {
  const seqs = [0, 1, 2, 42, 0xffffffff].map((s) => Array.from({ length: 5 }, seededRandom(s)));
  const keys = new Set(seqs.map((s) => s.join(",")));
  assert.equal(keys.size, seqs.length);
});

test("seededRandom: values lie in [0, 1) and spread over it", () => {
  const r = seededRandom(7);
  const bins = new Array(10).fill(0);
  for (let i = 0; i < 10_000; i++) {
    const x = r();
    assert.ok(x >= 0 && x < 1, String(x));
    bins[Math.floor(x * 10)]++;
  }
  for (const n of bins) assert.ok(n > 800 && n < 1200, `bins ${bins}`);
});

test("randomIndex: integers in [0, n), every index reachable", () => {
  const r = seededRandom(3);
  const seen = new Set<number>();
  for (let i = 0; i < 1000; i++) {
    const k = randomIndex(r, 7);
    assert.ok(Number.isInteger(k) && k >= 0 && k < 7, String(k));
    seen.add(k);
  }
  assert.equal(seen.size, 7);
  assert.equal(randomIndex(() => 0.999999999, 3), 2);
  assert.equal(randomIndex(() => 0, 3), 0);
});

test("osRandom: values in [0, 1)", () => {
  const r = osRandom();
  for (let i = 0; i < 100; i++) {
    const x = r();
    assert.ok(x >= 0 && x < 1);
  }
});

test("FakeClock: starts where told and moves only on advance", () => {
  const c = new FakeClock(500);
  assert.equal(c.now(), 500);
  assert.equal(c.now(), 500);
  c.advance(250);
  assert.equal(c.now(), 750);
  c.advance(0.5);
  assert.equal(c.now(), 750.5);
  assert.equal(new FakeClock().now(), 0);
});

test("FakeClock: timers run in time order inside advance, each at its due time", () => {
  const c = new FakeClock(100);
  const ran: string[] = [];
  c.after(30, () => ran.push(`c@${c.now()}`));
  c.after(10, () => ran.push(`a@${c.now()}`));
  c.after(20, () => ran.push(`b@${c.now()}`));
  c.after(10, () => ran.push(`a2@${c.now()}`)); // a tie runs in the order it was set
  assert.equal(c.pending, 4);
  assert.deepEqual(ran, [], "nothing runs before advance");
  c.advance(20);
  assert.deepEqual(ran, ["a@110", "a2@110", "b@120"]);
  assert.equal(c.now(), 120);
  assert.equal(c.pending, 1);
  c.advance(100);
  assert.deepEqual(ran, ["a@110", "a2@110", "b@120", "c@130"]);
  assert.equal(c.now(), 220, "time ends where advance said, past the last timer");
});

test("FakeClock: a timer set by a timer runs in the same advance when it falls due", () => {
  const c = new FakeClock();
  const ran: number[] = [];
  const tick = () => {
    ran.push(c.now());
    if (ran.length < 5) c.after(10, tick);
  };
  c.after(10, tick);
  c.advance(35);
  assert.deepEqual(ran, [10, 20, 30]);
  c.after(0, () => ran.push(-1)); // due now: runs in the next advance, even of 0
  assert.deepEqual(ran, [10, 20, 30]);
  c.advance(0);
  assert.deepEqual(ran, [10, 20, 30, -1]);
});

test("FakeClock: a cancelled timer never runs and is not pending", () => {
  const c = new FakeClock();
  const ran: string[] = [];
  const cancelA = c.after(10, () => ran.push("a"));
  c.after(10, () => ran.push("b"));
  const cancelC = c.after(5, () => cancelA()); // cancelled by an earlier timer
  assert.equal(c.pending, 3);
  cancelC();
  assert.equal(c.pending, 2);
  cancelA();
  assert.equal(c.pending, 1);
  c.advance(100);
  assert.deepEqual(ran, ["b"]);
  assert.equal(c.pending, 0);
  cancelA(); // cancelling twice, or after running, is harmless
});

test("FakeClock: subscribe hears each timer set, until removed", () => {
  const c = new FakeClock();
  let sets = 0;
  const off = c.subscribe(() => sets++);
  c.after(10, () => {});
  c.after(0, () => {});
  assert.equal(sets, 2);
  off();
  c.after(5, () => {});
  assert.equal(sets, 2);
});

test("FakeClock: advanceUntil stops as soon as the condition holds, or at the limit", () => {
  const c = new FakeClock();
  let fired = false;
  c.after(35, () => (fired = true));
  assert.equal(c.advanceUntil(() => fired, 1000), true);
  assert.equal(c.now(), 40, "in steps of 10 by default");
  assert.equal(c.advanceUntil(() => fired, 1000), true);
  assert.equal(c.now(), 40, "already true: no time passes");
  assert.equal(c.advanceUntil(() => false, 25, 10), false);
  assert.equal(c.now(), 65, "the last step is cut to the limit");
  assert.equal(c.advanceUntil(() => c.now() >= 66, 100, 1), true);
  assert.equal(c.now(), 66);
});

test("systemClock: after runs the timer, and its cancel stops it", async () => {
  const ran = Promise.withResolvers<void>();
  systemClock.after(1, () => ran.resolve());
  await ran.promise;
  let late = false;
  const cancel = systemClock.after(60_000, () => (late = true));
  cancel(); // the op sanitizer fails this test if the timer were left running
  assert.equal(late, false);
});

test("systemClock: monotonic", () => {
  const a = systemClock.now();
  const b = systemClock.now();
  assert.ok(b >= a);
});

test("sleep: resolves once its time has passed on the clock", async () => {
  const c = new FakeClock();
  const p = sleep(c, 50);
  c.advance(49);
  assert.equal(await settledNow(p), false, "not yet");
  c.advance(1);
  assert.equal(await settledNow(p), true);
  const q = sleep(c, 0, new AbortController().signal);
  c.advance(0);
  await q;
  assert.equal(c.pending, 0);
});

test("sleep: on the system clock, resolves after a short delay", async () => {
  await sleep(systemClock, 1);
  await sleep(systemClock, 0, new AbortController().signal);
});

test("sleep: rejects with the signal's reason when it aborts, and cancels its timer", async () => {
  const c = new FakeClock();
  const ac = new AbortController();
  const p = sleep(c, 60_000, ac.signal);
  assert.equal(c.pending, 1);
  const reason = new Error("shutting down");
  ac.abort(reason);
  await assert.rejects(p, (e) => e === reason);
  assert.equal(c.pending, 0);
  // The same on the system clock: the op sanitizer fails this test if the timer were left.
  const ac2 = new AbortController();
  const p2 = sleep(systemClock, 60_000, ac2.signal);
  ac2.abort(reason);
  await assert.rejects(p2, (e) => e === reason);
});

test("sleep: an already-aborted signal rejects at once", async () => {
  const c = new FakeClock();
  const ac = new AbortController();
  ac.abort("gone");
  await assert.rejects(sleep(c, 60_000, ac.signal), (e) => e === "gone");
  assert.equal(c.pending, 0, "no timer set");
});

test("pause: resolves on wake() before the timeout, and cancels its timer", async () => {
  const c = new FakeClock();
  const ac = new AbortController();
  const { done, wake } = pause(c, 60_000, ac.signal);
  assert.equal(await settledNow(done), false, "still waiting");
  wake();
  await done;
  wake(); // a second wake is harmless
  assert.equal(c.pending, 0);
});

test("pause: resolves (does not reject) when the signal aborts", async () => {
  const c = new FakeClock();
  const ac = new AbortController();
  const { done } = pause(c, 60_000, ac.signal);
  ac.abort(new Error("stop"));
  await done;
  assert.equal(c.pending, 0);
  const sys = pause(systemClock, 60_000, ac.signal); // already aborted: no timer at all
  await sys.done;
});

test("pause: resolves once its time has passed on the clock", async () => {
  const c = new FakeClock();
  const { done } = pause(c, 1000, new AbortController().signal);
  c.advance(999);
  assert.equal(await settledNow(done), false);
  c.advance(1);
  assert.equal(await settledNow(done), true);
  await pause(systemClock, 1, new AbortController().signal).done;
});

test("pause: an already-aborted signal ends it at once", async () => {
  const c = new FakeClock();
  const ac = new AbortController();
  ac.abort();
  const { done } = pause(c, 60_000, ac.signal);
  assert.equal(await settledNow(done), true, "still waiting on a 60 s timer");
  assert.equal(c.pending, 0);
});

test("every: runs on each period until stopped, even when the callback stops it", () => {
  const c = new FakeClock();
  const at: number[] = [];
  const stop = every(c, 100, () => at.push(c.now()));
  c.advance(350);
  assert.deepEqual(at, [100, 200, 300]);
  stop();
  assert.equal(c.pending, 0);
  c.advance(1000);
  assert.deepEqual(at, [100, 200, 300]);
  let n = 0;
  const self = every(c, 10, () => {
    if (++n === 2) self();
  });
  c.advance(100);
  assert.equal(n, 2);
  assert.equal(c.pending, 0);
});
