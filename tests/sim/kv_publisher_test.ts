/**
 * The simulated engine's KV events over ZeroMQ, read by the gateway's own subscriber: the
 * engine's stored blocks (with their tokens and parents), evictions and a flush arrive decoded
 * exactly as the log published them, numbered as the log numbers them; the replay ROUTER answers
 * what it buffers from a sequence number on; `encodeEngineBatch` is the layout the gateway's
 * decoder reads. The same wire against libzmq is in tests/kv/zmq_interop_test.ts.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import { decodeEngineBatch } from "../../lib/kv/engine_events.ts";
import type { KvEvent, KvEventBatch } from "../../lib/kv/events.ts";
import { requestReplay } from "../../lib/kv/replay.ts";
import type { KvStreamStatus } from "../../lib/kv/sink.ts";
import { dialZmtp, ZmqSubscriber } from "../../lib/kv/zmq_subscriber.ts";
import type { KvBatch } from "../../lib/sim/kv_events.ts";
import { encodeEngineBatch, SimKvPublisher } from "../../lib/sim/kv_publisher.ts";
import { prompt, virtualEngine } from "../../support/sim_engine.ts";
import { until, Waiters } from "../../support/wait.ts";

const BS = 16;

/** What the gateway should decode of one of the engine's batches. */
function expected(b: KvBatch): KvEvent[] {
  return b.events.map((e): KvEvent => {
    if (e.type === "stored") {
      return {
        kind: "stored",
        blocks: e.keys.map((k, j) => ({
          hash: String(k),
          tokenIds: e.tokens.slice(j * BS, (j + 1) * BS),
        })),
        parentHash: e.parent === null ? null : String(e.parent),
        blockSize: BS,
        loraId: null,
        medium: "GPU",
      };
    }
    if (e.type === "removed") {
      return { kind: "removed", hashes: e.keys.map(String), medium: "GPU" };
    }
    return { kind: "cleared" };
  });
}

Deno.test("sim kv publisher: stores, evictions and a flush reach the gateway's subscriber as the log published them", async () => {
  // Room for 4 blocks: the second prompt evicts the first's.
  const { engine } = virtualEngine({ kvTokens: 4 * BS, blockSize: BS });
  const publisher = new SimKvPublisher(engine.kvEvents, {
    host: "127.0.0.1",
    port: 0,
    replayPort: 0,
    blockSize: BS,
    clock: systemClock,
  });
  const published: KvBatch[] = [];
  const off = engine.kvEvents.subscribe(0, (b) => published.push(b));
  const got: KvEventBatch[] = [];
  const statuses: KvStreamStatus[] = [];
  const changed = new Waiters();
  const sub = new ZmqSubscriber({
    endpoint: publisher.endpoint,
    heartbeatIntervalMs: 0,
    clock: systemClock,
  }, {
    onBatch: (b) => (got.push(b), changed.poke()),
    onStatus: (s) => (statuses.push(s), changed.poke()),
  });
  sub.start();
  try {
    const pub = publisher.pub;
    await until(() => pub.subscribers === 1, (l) => pub.watch(l), "the subscription");
    await engine.submit({ tokens: prompt(1, 3 * BS), maxNewTokens: 1 }, () => {});
    await engine.submit({ tokens: prompt(2, 3 * BS), maxNewTokens: 1 }, () => {});
    assert.ok(engine.flushCache());
    engine.kvEvents.flush();
    const last = published.at(-1)!.seq;
    await changed.wait(() => sub.lastSeq === last, `batch ${last}`);
    const kinds = published.flatMap((b) => b.events.map((e) => e.type));
    for (const k of ["stored", "removed", "cleared"]) assert.ok(kinds.includes(k as never), k);
    assert.deepEqual(got.map((b) => b.seq), published.map((b) => b.seq));
    assert.deepEqual(got.map((b) => b.events), published.map(expected));
    assert.deepEqual(got.map((b) => b.ts), published.map((b) => b.ts / 1000));
    assert.deepEqual(statuses.map((s) => s.kind), ["connected"], "no gap, no restart");
    // The replay ROUTER holds them all: from the second on, as the engines answer.
    const replayed = await requestReplay({
      dial: dialZmtp,
      endpoint: publisher.replayEndpoint!,
      from: 2,
      to: last,
      timeoutMs: 5000,
      clock: systemClock,
    });
    assert.deepEqual(replayed.map(([seq]) => seq), published.slice(1).map((b) => b.seq));
    assert.deepEqual(
      replayed.map(([seq, p]) => decodeEngineBatch(p, seq).events),
      published.slice(1).map(expected),
    );
  } finally {
    off();
    await sub.close();
    await publisher.close();
    await engine.close();
  }
});

Deno.test("sim kv publisher: the payload is msgspec's array layout of a KVEventBatch", () => {
  const batch: KvBatch = {
    seq: 3,
    ts: 1500,
    events: [
      { type: "stored", keys: [2 ** 52 + 1], parent: 7, tokens: [1, 2] },
      { type: "removed", keys: [9] },
      { type: "cleared" },
    ],
  };
  const decoded = decodeEngineBatch(encodeEngineBatch(batch, 2), 3);
  assert.deepEqual(decoded, {
    seq: 3,
    ts: 1.5,
    rank: null,
    skipped: 0,
    events: [
      {
        kind: "stored",
        blocks: [{ hash: String(2 ** 52 + 1), tokenIds: [1, 2] }],
        parentHash: "7",
        blockSize: 2,
        loraId: null,
        medium: "GPU",
      },
      { kind: "removed", hashes: ["9"], medium: "GPU" },
      { kind: "cleared" },
    ],
  });
});
