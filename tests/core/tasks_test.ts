import assert from "node:assert/strict";
import { Tasks } from "../../lib/core/tasks.ts";

Deno.test("tasks: a settled task leaves the set; a failed one does too, without rejecting", async () => {
  const t = new Tasks();
  const ok = Promise.withResolvers<void>();
  const bad = Promise.withResolvers<void>();
  t.add(ok.promise, () => {});
  t.add(bad.promise, () => {});
  assert.equal(t.size, 2);
  ok.resolve();
  bad.reject(new Error("broke"));
  await Promise.allSettled([ok.promise, bad.promise]);
  await Promise.resolve();
  assert.equal(t.size, 0);
});

Deno.test("tasks: close stops what runs and resolves only once all of it has settled", async () => {
  const t = new Tasks();
  const order: string[] = [];
  for (const name of ["a", "b"]) {
    const p = Promise.withResolvers<void>();
    // Each task settles a little after it is stopped, as a cancelled read does.
    t.add(p.promise.then(() => void order.push(`${name} settled`)), () => {
      order.push(`${name} stopped`);
      queueMicrotask(p.resolve);
    });
  }
  await t.close();
  order.push("closed");
  assert.deepEqual(order, ["a stopped", "b stopped", "a settled", "b settled", "closed"]);
  assert.equal(t.size, 0);
});

Deno.test("tasks: a task added after close is stopped at once", async () => {
  const t = new Tasks();
  await t.close();
  let stopped = false;
  t.add(new Promise(() => {}), () => (stopped = true));
  assert.equal(stopped, true);
  assert.equal(t.size, 0);
});
