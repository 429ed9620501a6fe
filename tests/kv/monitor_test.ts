/**
 * KV-event mode's monitor: a worker's batches build its model's index, an unchainable store is
 * left out and counted (the index under-reports, never over-reports), a restarted publisher or
 * a lost gap drops the worker's entries, and a detached worker leaves at once, its stream closed.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import type { KvEvent } from "../../lib/kv/events.ts";
import { KvMonitor } from "../../lib/kv/monitor.ts";
import type { KvEventSink } from "../../lib/kv/sink.ts";

const stored = (hashes: string[], tokens: number[], parent: string | null = null): KvEvent => ({
  kind: "stored",
  blocks: hashes.map((hash, i) => ({ hash, tokenIds: tokens.slice(i * 2, i * 2 + 2) })),
  parentHash: parent,
  blockSize: 2,
  loraId: null,
  medium: null,
});

Deno.test("kv monitor: batches build the model's index; refusals, restarts, gaps and detaching", async () => {
  const sinks = new Map<string, KvEventSink>();
  const closed: string[] = [];
  const seen: string[] = [];
  const m = new KvMonitor({
    clock: new FakeClock(),
    ttlMs: 0,
    maxEntries: 0,
    observer: {
      refused: (w, r) => seen.push(`${w} refused ${r}`),
      reset: (w, r) => seen.push(`${w} reset ${r}`),
    },
  });
  const start = (w: string) => (sink: KvEventSink) => {
    sinks.set(w, sink);
    return { close: () => (closed.push(w), Promise.resolve()) };
  };
  m.attach("http://w1", "m", start("w1"));
  m.attach("http://w2", "m", start("w2"));
  assert.equal(m.index("other"), null);
  const batch = (events: KvEvent[], seq = 1) => ({ seq, ts: 0, events, rank: null, skipped: 0 });
  const prompt = [1, 2, 3, 4, 5, 6];
  sinks.get("w1")!.onBatch(batch([stored(["a", "b", "c"], prompt)]));
  sinks.get("w2")!.onBatch(batch([stored(["x"], prompt), stored(["y"], [9, 9], "unseen")]));
  assert.deepEqual(m.index("m")!.match(prompt), new Map([["http://w1", 6], ["http://w2", 2]]));
  assert.deepEqual(seen, ["http://w2 refused unknown_parent"]);
  sinks.get("w1")!.onStatus({ kind: "publisher_restarted", lastSeq: 9, seq: 1 });
  sinks.get("w2")!.onStatus({ kind: "gap_unrecoverable", from: 2, to: 3, missing: 2, reason: "" });
  assert.ok(m.index("m")!.empty, "both reset");
  assert.deepEqual(seen.slice(1), ["http://w1 reset restart", "http://w2 reset gap"]);
  sinks.get("w1")!.onBatch(batch([stored(["a"], prompt)], 2));
  await m.detach("http://w1");
  assert.ok(m.index("m")!.empty, "a detached worker leaves at once");
  assert.deepEqual(closed, ["w1"]);
  await m.close();
  assert.deepEqual(closed, ["w1", "w2"]);
  assert.equal(m.size, 0);
});

Deno.test("kv monitor: a worker reports while its stream is connected", async () => {
  const sinks = new Map<string, KvEventSink>();
  const m = new KvMonitor({ clock: new FakeClock(), ttlMs: 0, maxEntries: 0 });
  const start = (w: string) => (sink: KvEventSink) => {
    sinks.set(w, sink);
    return { close: () => Promise.resolve() };
  };
  assert.equal(m.view("m"), null, "no worker publishes for the model");
  m.attach("http://w1", "m", start("w1"));
  const view = m.view("m")!;
  assert.equal(view.reports("http://w1"), false, "not before it connects");
  const w1 = sinks.get("w1")!;
  w1.onStatus({ kind: "connected", endpoint: "tcp://w1:1" });
  assert.equal(view.reports("http://w1"), true);
  w1.onBatch({ seq: 1, ts: 0, events: [stored(["a"], [1, 2])], rank: null, skipped: 0 });
  assert.deepEqual(view.match([1, 2]), new Map([["http://w1", 2]]));
  w1.onStatus({ kind: "disconnected", endpoint: "tcp://w1:1", reason: "reset", retryInMs: 100 });
  assert.equal(view.reports("http://w1"), false, "down: its stores are not seen");
  assert.equal(view.empty, false, "its entries stay for when it reconnects");
  w1.onStatus({
    kind: "connect_failed",
    endpoint: "tcp://w1:1",
    reason: "refused",
    retryInMs: 200,
  });
  assert.equal(view.reports("http://w1"), false);
  w1.onStatus({ kind: "connected", endpoint: "tcp://w1:1" });
  assert.equal(view.reports("http://w1"), true);
  assert.equal(view.reports("http://w2"), false, "never attached");
  await m.close();
  assert.equal(view.reports("http://w1"), false, "detached");
});
