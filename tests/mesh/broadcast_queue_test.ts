import assert from "node:assert/strict";
import { BroadcastQueue } from "../../lib/mesh/broadcast_queue.ts";
import type { MemberUpdate } from "../../lib/mesh/member.ts";

const u = (name: string, incarnation = 1): MemberUpdate => ({
  name,
  address: `${name}:1`,
  status: "ALIVE",
  incarnation,
  from: "",
});

Deno.test("broadcast queue: least-sent first, newest first among equals, gone after the limit", () => {
  const q = new BroadcastQueue();
  q.push(u("a"));
  q.push(u("b"));
  q.push(u("c"));
  assert.deepEqual(q.take(2, 2).map((x) => x.name), ["c", "b"]);
  assert.deepEqual(q.take(2, 2).map((x) => x.name), ["a", "c"], "a has been sent least");
  assert.deepEqual(q.take(5, 2).map((x) => x.name), ["b", "a"], "c reached its limit");
  assert.equal(q.size, 0);
});

Deno.test("broadcast queue: a newer update about a member replaces the queued one", () => {
  const q = new BroadcastQueue();
  q.push(u("a", 1));
  q.take(1, 10);
  q.push(u("a", 2));
  assert.equal(q.size, 1);
  const [x] = q.take(1, 10);
  assert.equal(x.incarnation, 2);
  q.remove("a");
  assert.equal(q.size, 0);
  assert.deepEqual(q.take(0, 1), []);
});
