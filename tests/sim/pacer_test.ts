/**
 * The pacer: `timeScale` maps simulated to wall time, sub-millisecond sleeps accumulate as debt,
 * oversleep is made up, idle time is forgiven, and the simulated clock interpolates mid-step.
 * All on a virtual clock.
 */

import assert from "node:assert/strict";
import { DEBT_FLOOR_MS, MIN_SLEEP_MS, Pacer, YIELD_EVERY_STEPS } from "../../lib/sim/pacer.ts";

/** A virtual wall clock whose sleep advances it (plus `oversleep`) and records the request. */
function virtualWall(oversleep = 0) {
  const w = { t: 0, sleeps: [] as number[] };
  const deps = {
    now: () => w.t,
    sleep: (ms: number) => {
      w.sleeps.push(ms);
      w.t += ms + oversleep;
      return Promise.resolve();
    },
  };
  return { w, deps };
}

const close = (a: number, b: number, eps = 1e-9) => Math.abs(a - b) <= eps;

Deno.test("pacer: at timeScale 1 each step sleeps its duration and advances simulated time", async () => {
  const { w, deps } = virtualWall();
  const p = new Pacer(1, deps);
  await p.step(6.35);
  await p.step(125);
  assert.deepEqual(w.sleeps, [6.35, 125]);
  assert.equal(p.simNow(), 131.35);
  assert.equal(w.t, 131.35);
});

Deno.test("pacer: timeScale 0.5 halves wall time, simulated time is unchanged", async () => {
  const { w, deps } = virtualWall();
  const p = new Pacer(0.5, deps);
  for (let i = 0; i < 10; i++) await p.step(10);
  assert.equal(p.simNow(), 100);
  assert.ok(close(w.t, 50));
});

Deno.test("pacer: sleeps under a millisecond accumulate as debt", async () => {
  const { w, deps } = virtualWall();
  const p = new Pacer(0.01, deps);
  for (let i = 0; i < 100; i++) await p.step(6.35);
  assert.ok(w.sleeps.every((ms) => ms >= MIN_SLEEP_MS), String(w.sleeps));
  assert.ok(w.sleeps.length >= 5 && w.sleeps.length <= 7, String(w.sleeps.length));
  assert.ok(w.t <= 6.35 && w.t > 6.35 - MIN_SLEEP_MS, String(w.t));
  assert.ok(close(p.simNow(), 635, 1e-6));
});

Deno.test("pacer: timeScale 0 never sleeps but yields to the event loop now and then", async () => {
  const { w, deps } = virtualWall();
  const p = new Pacer(0, deps);
  for (let i = 0; i < 3 * YIELD_EVERY_STEPS; i++) await p.step(6);
  assert.deepEqual(w.sleeps, [0, 0, 0]);
  assert.equal(p.simNow(), 18 * YIELD_EVERY_STEPS);
});

Deno.test("pacer: oversleep is made up by later steps, within the debt floor", async () => {
  const { w, deps } = virtualWall(3);
  const p = new Pacer(1, deps);
  for (let i = 0; i < 100; i++) await p.step(2);
  assert.ok(Math.abs(w.t - 200) <= -DEBT_FLOOR_MS, `wall ${w.t} for 200 simulated ms`);
  assert.ok(w.sleeps.length < 100);
});

Deno.test("pacer: idle wall time is forgiven on resume, not run off as a burst", async () => {
  const { w, deps } = virtualWall();
  const p = new Pacer(1, deps);
  await p.step(5);
  w.t += 1000; // idle
  p.resume();
  await p.step(5);
  assert.deepEqual(w.sleeps, [5, 5]);
});

Deno.test("pacer: simulated time interpolates from wall time during a step", async () => {
  let release = () => {};
  let t = 0;
  const p = new Pacer(2, {
    now: () => t,
    sleep: () => new Promise<void>((r) => (release = r)),
  });
  const step = p.step(10);
  assert.equal(p.simNow(), 0);
  t = 5; // a quarter of the 20 wall ms
  assert.equal(p.simNow(), 2.5);
  t = 100;
  assert.equal(p.simNow(), 10, "clamped to the step's end");
  release();
  await step;
  assert.equal(p.simNow(), 10);
});

Deno.test("pacer: a rejected sleep rejects the step, simulated time still moves", async () => {
  const p = new Pacer(1, { now: () => 0, sleep: () => Promise.reject(new Error("closed")) });
  await assert.rejects(p.step(4), /closed/);
  assert.equal(p.simNow(), 4);
});
