/**
 * The simulated engine's KV event log: nothing recorded before the first subscriber, events of
 * one synchronous stretch in one batch, sequence numbers from 1, replay after a cursor, and the
 * replay window's bound.
 */

import assert from "node:assert/strict";
import { type KvBatch, KvEventLog } from "../../lib/sim/kv_events.ts";

const removed = (k: number) => ({ type: "removed" as const, keys: [k] });

Deno.test("kv event log: batches per synchronous stretch, numbered from 1, replayed after a cursor", async () => {
  const log = new KvEventLog(3);
  log.add(removed(0)); // nobody listens yet: not recorded
  await Promise.resolve();
  assert.equal(log.seq, 0);
  const live: KvBatch[] = [];
  const off = log.subscribe(0, (b) => live.push(b));
  log.add(removed(1));
  log.add(removed(2));
  await Promise.resolve();
  log.add(removed(3));
  log.flush();
  for (let k = 4; k < 7; k++) {
    log.add(removed(k));
    log.flush();
  }
  assert.deepEqual(live.map((b) => [b.seq, b.events.length]), [[1, 2], [2, 1], [3, 1], [4, 1], [
    5,
    1,
  ]]);
  off();
  const replayed: number[] = [];
  log.subscribe(3, (b) => replayed.push(b.seq));
  assert.deepEqual(replayed, [4, 5], "only what is kept after the cursor (3 batches kept)");
  const early: number[] = [];
  log.subscribe(1, (b) => early.push(b.seq));
  assert.deepEqual(early, [3, 4, 5], "a cursor older than the window gets the window: a gap");
});
