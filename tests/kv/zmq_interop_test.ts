/**
 * The ZMTP client and the subscriber against a real ZeroMQ publisher (libzmq through npm
 * `zeromq` in node, run by tests/support/zmq_node.ts) shaped like the engines': batches in
 * order, a gap recovered through the replay ROUTER, a publisher whose sequence restarts, one
 * killed and started again on the same ports, PING answered, and close while waiting; and our
 * PUB and replay ROUTER (what the simulated engine publishes with) read by libzmq's SUB and
 * DEALER. Skipped, saying why, where node or npm is missing or zeromq cannot be installed.
 */

import assert from "node:assert/strict";
import { encode } from "@msgpack/msgpack";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { ZmqPub } from "../../lib/kv/zmq_pub.ts";
import { seqFrame, ZmqReplayServer } from "../../lib/kv/zmq_replay_server.ts";
import { ZmqSubscriber } from "../../lib/kv/zmq_subscriber.ts";
import { Recorder } from "../support/kv_recorder.ts";
import { ZmtpSocket } from "../../lib/kv/zmtp.ts";
import { poll, until, within } from "../../support/wait.ts";
import { NodePublisher, NodeSubscriber, zeromqForNode } from "../support/zmq_node.ts";

const zmq = await zeromqForNode();
if ("skip" in zmq) console.warn(`zmq interop tests skipped: ${zmq.skip}`);
const dir = "dir" in zmq ? zmq.dir : "";
const ignore = "skip" in zmq;

/** Batch `n` in vLLM's array layout: one stored block whose uint64 hash is above 2^63. */
const payload = (n: number) =>
  encode([n, [["BlockStored", [2n ** 63n + BigInt(n)], null, [n, n + 1], 2, null, "GPU"]], 0], {
    useBigInt64: true,
  });

interface Stream {
  pub: NodePublisher;
  sink: Recorder;
  sub: ZmqSubscriber;
}

/** A publisher and a subscriber to it (heartbeats on: libzmq must answer them). */
async function withStream(fn: (s: Stream) => Promise<void>): Promise<void> {
  const pub = await NodePublisher.start(dir);
  const sink = new Recorder();
  const sub = new ZmqSubscriber({
    endpoint: pub.pubEndpoint,
    replayEndpoint: pub.replayEndpoint,
    topic: "kv",
    reconnectInitialMs: 20,
    reconnectMaxMs: 100,
    heartbeatIntervalMs: 100,
    heartbeatTimeoutMs: 3000,
    clock: systemClock,
  }, sink);
  sub.start();
  const s = { pub, sink, sub };
  try {
    await fn(s);
  } finally {
    await sub.close();
    await s.pub.close();
  }
}

/**
 * Publishes until a batch gets through (a new subscription reaches a PUB a moment after the
 * connection: earlier batches are not sent to it), then until the last one sent is applied.
 */
async function prime(s: Stream): Promise<number> {
  const before = s.sink.batches.length;
  for (let i = 0; i < 100; i++) {
    const seq = await s.pub.publish(payload(i));
    const got = await s.sink.until(() => s.sink.batches.length > before, "a first batch", 50)
      .then(() => true, () => false);
    if (got) {
      await s.sink.until(() => s.sub.lastSeq === seq, `batch ${seq}`);
      return seq;
    }
  }
  throw new Error("no batch got through in 100 tries");
}

Deno.test({
  name: "zmq interop: batches from libzmq's PUB arrive in order and decoded",
  ignore,
  fn: () =>
    withStream(async (s) => {
      const first = await prime(s);
      const from = s.sink.batches.length;
      let last = first;
      for (let i = 0; i < 20; i++) last = await s.pub.publish(payload(100 + i));
      await s.sink.until(() => s.sub.lastSeq === last, `batch ${last}`);
      const seqs = s.sink.batches.slice(from).map((b) => b.seq);
      assert.deepEqual(seqs, Array.from({ length: 20 }, (_, i) => first + 1 + i));
      const stored = s.sink.batches.at(-1)!.events[0];
      assert.deepEqual(stored.kind === "stored" && stored.blocks, [
        { hash: (2n ** 63n + 119n).toString(), tokenIds: [119, 120] },
      ]);
      assert.deepEqual(s.sink.statuses.map((x) => x.kind), ["connected"]);
    }),
});

Deno.test({
  name: "zmq interop: a gap is recovered through the replay ROUTER",
  ignore,
  fn: () =>
    withStream(async (s) => {
      const last = await prime(s);
      for (let i = 0; i < 3; i++) await s.pub.drop(payload(200 + i));
      const next = await s.pub.publish(payload(203));
      await s.sink.until(() => s.sub.lastSeq === next, `batch ${next}`);
      assert.deepEqual(s.sink.batches.slice(-4).map((b) => b.seq), [
        last + 1,
        last + 2,
        last + 3,
        next,
      ]);
      assert.deepEqual(s.pub.replays, [last + 1]);
      assert.deepEqual(s.sink.of("gap_recovered"), [
        { kind: "gap_recovered", from: last + 1, to: last + 3 },
      ]);
    }),
});

Deno.test({
  name: "zmq interop: a sequence starting over is a restarted publisher",
  ignore,
  fn: () =>
    withStream(async (s) => {
      const last = await prime(s);
      await s.pub.reset();
      await s.pub.publish(payload(0));
      await s.sink.until(() => s.sink.of("publisher_restarted").length === 1, "the restart");
      assert.deepEqual(s.sink.of("publisher_restarted"), [
        { kind: "publisher_restarted", lastSeq: last, seq: 0 },
      ]);
      assert.equal(s.sub.lastSeq, 0);
    }),
});

Deno.test({
  name: "zmq interop: a killed publisher started again on its ports is reconnected to",
  ignore,
  fn: () =>
    withStream(async (s) => {
      await prime(s);
      let last = 0;
      for (let i = 0; i < 10; i++) last = await s.pub.publish(payload(i));
      await s.sink.until(() => s.sub.lastSeq === last, `batch ${last}`);
      const { pubPort, replayPort } = s.pub;
      await s.pub.kill();
      await s.sink.until(() => s.sink.of("disconnected").length === 1, "the disconnection");
      s.pub = await NodePublisher.start(dir, { pubPort, replayPort });
      await s.sink.until(() => s.sink.of("connected").length === 2, "the reconnection");
      await prime(s);
      const restart = s.sink.of("publisher_restarted");
      assert.equal(restart.length, 1);
      assert.equal(restart[0].lastSeq, last);
      assert.ok(restart[0].seq < last, `seq ${restart[0].seq} went back`);
    }),
});

Deno.test({
  name: "zmq interop: libzmq answers our PING, and close ends a pending receive",
  ignore,
  fn: async () => {
    const pub = await NodePublisher.start(dir);
    const clock = new FakeClock();
    const sub = await ZmtpSocket.connect("SUB", pub.pubEndpoint, { clock });
    try {
      assert.deepEqual([sub.peerType, sub.lastReceivedAt], ["PUB", 0]);
      clock.advance(100);
      await sub.ping();
      const receiving = sub.receive();
      await poll(() => sub.lastReceivedAt === 100, "a PONG", 5000);
      sub.close();
      assert.equal(await within(receiving, "receive after close", 1000), null);
    } finally {
      sub.close();
      await pub.close();
    }
  },
});

Deno.test({
  name: "zmq interop: a subscriber waiting for batches closes at once",
  ignore,
  fn: () =>
    withStream(async (s) => {
      await prime(s);
      await within(s.sub.close(), "close", 1000);
      assert.ok(!s.sub.connected);
    }),
});

Deno.test({
  name:
    "zmq interop: libzmq's SUB reads our PUB (its topic filter applied) and its DEALER our replays",
  ignore,
  fn: async () => {
    const enc = new TextEncoder();
    const sent: [number, Uint8Array][] = [];
    const pub = new ZmqPub({ clock: systemClock });
    const replay = new ZmqReplayServer(
      { clock: systemClock },
      (from) => sent.filter(([seq]) => seq >= from),
    );
    let sub: NodeSubscriber | null = null;
    try {
      sub = await NodeSubscriber.start(dir, pub.endpoint, replay.endpoint, "kv");
      await until(() => pub.subscribers === 1, (l) => pub.watch(l), "libzmq's subscription");
      for (let seq = 0; seq < 20; seq++) {
        sent.push([seq, payload(seq)]);
        pub.publish([enc.encode("kv@0"), seqFrame(seq), payload(seq)]);
        pub.publish([enc.encode("other"), seqFrame(seq), payload(seq)]);
      }
      const s = sub;
      await s.changed.wait(() => s.messages.length >= 20, "20 messages in node");
      assert.deepEqual(s.messages.map((m) => [m.topic, m.seq]), sent.map(([n]) => ["kv@0", n]));
      assert.deepEqual(s.messages.map((m) => m.payload), sent.map(([, p]) => p));
      const replayed = await s.replay(15);
      assert.deepEqual(replayed, sent.slice(15));
      assert.deepEqual(await s.replay(100), []);
    } finally {
      await sub?.close();
      await pub.close();
      await replay.close();
    }
  },
});
