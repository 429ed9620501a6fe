/**
 * The cursor-resumed KV stream (sglang's `SubscribeKvEvents`) with scripted sources on fake
 * time: batches in order, a reopen from the last applied number after the stream ends, a gap
 * filled by resubscribing (or lost when the worker no longer holds it), a restarted publisher,
 * failed opens backing off, and close while waiting.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { type CursorSource, CursorSubscriber } from "../../lib/kv/cursor_subscriber.ts";
import type { KvEventBatch } from "../../lib/kv/events.ts";
import type { KvStreamStatus } from "../../lib/kv/sink.ts";
import { Waiters } from "../../support/wait.ts";

const batch = (seq: number): KvEventBatch => ({ seq, ts: 0, events: [], rank: null, skipped: 0 });

/** A source that gives `seqs`, then ends (`end`) or waits until cancelled. */
function source(seqs: number[], end: "ends" | "waits" = "ends"): CursorSource {
  const queue = [...seqs];
  let cancelled: (() => void) | null = null;
  return {
    next: () => {
      const s = queue.shift();
      if (s !== undefined) return Promise.resolve(batch(s));
      if (end === "ends") return Promise.resolve(null);
      return new Promise((resolve) => (cancelled = () => resolve(null)));
    },
    cancel: () => cancelled?.(),
  };
}

function setup(scripts: (CursorSource | Error)[]) {
  const clock = new FakeClock();
  const events = new Waiters();
  const cursors: number[] = [];
  const applied: number[] = [];
  const statuses: KvStreamStatus[] = [];
  const sub = new CursorSubscriber({
    endpoint: "grpc://w1:1",
    clock,
    reconnectInitialMs: 100,
    open: (cursor) => {
      cursors.push(cursor);
      events.poke();
      const next = scripts.shift() ?? source([], "waits");
      if (next instanceof Error) throw next;
      return next;
    },
  }, {
    onBatch: (b) => (applied.push(b.seq), events.poke()),
    onStatus: (s) => (statuses.push(s), events.poke()),
  });
  sub.start();
  return {
    sub,
    clock,
    events,
    cursors,
    applied,
    statuses,
    kinds: () => statuses.map((s) => s.kind),
  };
}

Deno.test("cursor stream: batches in order; an ended stream reopens after a delay from the last applied", async () => {
  const t = setup([source([1, 2, 3])]);
  await t.events.wait(() => t.kinds().includes("disconnected"), "the stream ended");
  assert.deepEqual(t.applied, [1, 2, 3]);
  assert.deepEqual(t.cursors, [0]);
  t.clock.advance(99);
  assert.deepEqual(t.cursors, [0], "not before the delay");
  t.clock.advance(1);
  await t.events.wait(() => t.cursors.length === 2, "reopened");
  assert.deepEqual(t.cursors, [0, 3]);
  await t.sub.close();
});

Deno.test("cursor stream: a gap resubscribes at once from the last applied; the replay fills it or it is lost", async () => {
  const t = setup([source([1, 4]), source([2, 3, 4, 5], "waits")]);
  await t.events.wait(() => t.applied.length === 5, "all five");
  assert.deepEqual(t.applied, [1, 2, 3, 4, 5]);
  assert.deepEqual(t.cursors, [0, 1]);
  assert.ok(t.kinds().includes("gap_recovered"));
  await t.sub.close();

  const u = setup([source([1, 4]), source([4, 5], "waits")]);
  await u.events.wait(() => u.applied.length === 3, "three");
  assert.deepEqual(u.applied, [1, 4, 5]);
  const lost = u.statuses.find((s) => s.kind === "gap_unrecoverable");
  assert.deepEqual(lost && { from: lost.from, to: lost.to, missing: lost.missing }, {
    from: 2,
    to: 3,
    missing: 2,
  });
  await u.sub.close();
});

Deno.test("cursor stream: a first batch at or below the cursor is a restarted publisher", async () => {
  const t = setup([source([5, 6]), source([1, 2], "waits")]);
  await t.events.wait(() => t.kinds().includes("disconnected"), "ended");
  t.clock.advance(100);
  await t.events.wait(() => t.applied.length === 4, "after the restart");
  assert.deepEqual(t.applied, [5, 6, 1, 2]);
  assert.deepEqual(t.cursors, [0, 6]);
  const r = t.statuses.find((s) => s.kind === "publisher_restarted");
  assert.deepEqual(r && { lastSeq: r.lastSeq, seq: r.seq }, { lastSeq: 6, seq: 1 });
  await t.sub.close();
});

Deno.test("cursor stream: a failed open backs off doubling; close ends a wait at once", async () => {
  const t = setup([new Error("no route"), new Error("no route"), source([1], "waits")]);
  await t.events.wait(() => t.kinds().includes("connect_failed"), "first failure");
  t.clock.advance(100);
  await t.events.wait(() => t.cursors.length === 2, "second try");
  t.clock.advance(199);
  assert.equal(t.cursors.length, 2, "the second delay doubled");
  t.clock.advance(1);
  await t.events.wait(() => t.applied.length === 1, "connected");
  assert.deepEqual(
    t.statuses.filter((s) => s.kind === "connect_failed").map((s) =>
      "retryInMs" in s && s.retryInMs
    ),
    [100, 200],
  );
  await t.sub.close(); // the source waits: close cancels it
  assert.deepEqual(t.applied, [1]);
});
