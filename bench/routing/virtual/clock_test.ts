/**
 * The virtual clock: timers fire in (time, registration) order, each at its own time; whatever a
 * fired timer sets off settles before time moves on, however long its promise chain; aborts,
 * cancels, `done` and `until`; and a simulated engine paced on it takes exactly its simulated
 * time × its time scale.
 */

import assert from "node:assert/strict";
import { SimEngine } from "../../../lib/sim/engine.ts";
import { VirtualClock } from "./clock.ts";
import { DEFAULTS, prompt } from "../../../support/sim_engine.ts";

for (const together of [false, true]) {
  const mode = together ? "same-instant timers in one round" : "one timer a round";

  Deno.test(`virtual clock (${mode}): time order, ties in registration order`, async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    const at = (t: number, name: string) => clock.at(t, () => log.push(`${name}@${clock.now()}`));
    at(30, "a");
    at(10, "b");
    at(20, "c");
    at(10, "d");
    clock.after(0, () => log.push(`e@${clock.now()}`));
    const stats = await clock.drive({ together });
    assert.deepEqual(log, ["e@0", "b@10", "d@10", "c@20", "a@30"]);
    assert.equal(stats.events, 5);
    assert.equal(stats.reason, "idle");
    assert.equal(clock.now(), 30);
  });

  Deno.test(`virtual clock (${mode}): a long promise chain settles before time moves`, async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    clock.at(10, async () => {
      // Hundreds of microtask hops and nested joins, then a timer earlier than one already set.
      for (let i = 0; i < 300; i++) await null;
      await Promise.all([
        (async () => {
          for (let i = 0; i < 50; i++) await Promise.resolve();
        })(),
        Promise.resolve().then(() => null),
      ]);
      await clock.sleep(1);
      log.push(`chain@${clock.now()}`);
      await clock.sleep(0);
      log.push(`zero@${clock.now()}`);
    });
    clock.at(11, () => log.push(`same@${clock.now()}`));
    clock.at(12, () => log.push(`later@${clock.now()}`));
    await clock.drive({ together });
    // The chain's timer at 11 was set after `same`'s: it fires second at 11, its zero sleep next.
    assert.deepEqual(log, ["same@11", "chain@11", "zero@11", "later@12"]);
  });
}

Deno.test("virtual clock: an aborted sleep rejects with the reason and never fires", async () => {
  const clock = new VirtualClock();
  const ac = new AbortController();
  const slept = clock.sleep(100, ac.signal);
  clock.at(5, () => ac.abort(new Error("stop")));
  const fired: number[] = [];
  clock.at(200, () => fired.push(clock.now()));
  const cancel = clock.at(150, () => fired.push(-1));
  cancel();
  const drove = clock.drive();
  await assert.rejects(slept, /stop/);
  const stats = await drove;
  assert.deepEqual(fired, [200]);
  assert.equal(stats.events, 2); // the abort at 5 and the timer at 200
  assert.equal(clock.pending, 0);
});

Deno.test("virtual clock: drive stops when done holds or before a timer past until", async () => {
  const clock = new VirtualClock();
  let n = 0;
  const tick = () => {
    n++;
    clock.after(10, tick);
  };
  clock.after(10, tick);
  const done = await clock.drive({ done: () => n === 3 });
  assert.equal(done.reason, "done");
  assert.equal(clock.now(), 30);
  const until = await clock.drive({ until: 55 });
  assert.equal(until.reason, "until");
  assert.equal(n, 5);
  assert.equal(clock.now(), 50);
});

Deno.test("virtual clock: an engine at time scale 2 takes twice its simulated ms", async () => {
  const clock = new VirtualClock();
  const engine = new SimEngine({ ...DEFAULTS, timeScale: 2 }, {
    now: () => clock.now(),
    sleep: (ms, signal) => clock.sleep(ms, signal),
  });
  const firstAt: number[] = [];
  const runs = [1, 2].map((salt) =>
    engine.submit({ tokens: prompt(salt, 1000), maxNewTokens: 3 }, (_id, i) => {
      if (i === 0) firstAt.push(clock.now());
    })
  );
  await clock.drive();
  const results = await Promise.all(runs);
  // Both 1000-token prompts prefill in one 2000-token step at 8000 tokens/s: 250 simulated ms.
  assert.deepEqual(results.map((r) => r.ttftMs), [250, 250]);
  assert.deepEqual(firstAt, [500, 500]);
  await engine.close();
});
