/**
 * Injectable time and randomness: the seeded generator is reproducible and in range, the manual
 * clock moves only when told, `sleep` rejects on abort, and `pause` ends on timeout, wake or
 * abort without ever rejecting. Timers are checked by the op sanitizer (turned on here because
 * Deno 2.9 no longer does by default), so every path must clear its timer.
 */

import assert from "node:assert/strict";
import {
  ManualClock,
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

test("ManualClock: starts where told and moves only on advance", () => {
  const c = new ManualClock(500);
  assert.equal(c.now(), 500);
  assert.equal(c.now(), 500);
  c.advance(250);
  assert.equal(c.now(), 750);
  c.advance(0.5);
  assert.equal(c.now(), 750.5);
  assert.equal(new ManualClock().now(), 0);
});

test("systemClock: monotonic", () => {
  const a = systemClock.now();
  const b = systemClock.now();
  assert.ok(b >= a);
});

test("sleep: resolves after a short delay", async () => {
  await sleep(1);
  await sleep(0, new AbortController().signal);
});

test("sleep: rejects with the signal's reason when it aborts, and clears its timer", async () => {
  const ac = new AbortController();
  const p = sleep(60_000, ac.signal);
  const reason = new Error("shutting down");
  ac.abort(reason);
  await assert.rejects(p, (e) => e === reason);
});

test("sleep: an already-aborted signal rejects at once", async () => {
  const ac = new AbortController();
  ac.abort("gone");
  await assert.rejects(sleep(60_000, ac.signal), (e) => e === "gone");
});

test("pause: resolves on wake() before the timeout", async () => {
  const ac = new AbortController();
  const { done, wake } = pause(60_000, ac.signal);
  assert.equal(await settledNow(done), false, "still waiting");
  wake();
  await done;
  wake(); // a second wake is harmless
});

test("pause: resolves (does not reject) when the signal aborts", async () => {
  const ac = new AbortController();
  const { done } = pause(60_000, ac.signal);
  ac.abort(new Error("stop"));
  await done;
});

test("pause: resolves after its timeout", async () => {
  const { done } = pause(1, new AbortController().signal);
  await done;
});

Deno.test({
  name: "pause: an already-aborted signal ends it at once",
  sanitizeOps: true,
  sanitizeResources: true,
  fn: async () => {
    const ac = new AbortController();
    ac.abort();
    const { done, wake } = pause(60_000, ac.signal);
    try {
      assert.equal(await settledNow(done), true, "still waiting on a 60 s timer");
    } finally {
      wake();
    }
  },
});
