/**
 * The subscriber's logic over in-memory sockets and fake time: batches in order, gaps replayed
 * from the last applied number + 1 (wholly, partly, or not at all), restarts, reconnection with
 * doubling delays, heartbeats that drop a silent connection, bad messages skipped, a throwing
 * sink survived, and close ending everything. The same against a real libzmq publisher is in
 * zmq_interop_test.ts.
 */

import assert from "node:assert/strict";
import { encode } from "@msgpack/msgpack";
import { FakeClock } from "../../lib/core/clock.ts";
import { createLogger } from "../../lib/core/log.ts";
import type { Dial, KvSocket } from "../../lib/kv/replay.ts";
import { ZmqSubscriber, type ZmqSubscriberOptions } from "../../lib/kv/zmq_subscriber.ts";
import { Recorder } from "../support/kv_recorder.ts";
import { type Message, ZmtpError } from "../../lib/kv/zmtp.ts";
import { timerSet, Waiters, within } from "../../support/wait.ts";

const ENDPOINT = "tcp://engine:5557";
const REPLAY = "tcp://engine:5558";

/** A socket fed by the test. */
class FakeSocket implements KvSocket {
  lastReceivedAt: number;
  closed = false;
  pings = 0;
  readonly sent: Uint8Array[][] = [];
  readonly #queue: (Message | null)[] = [];
  #waiter: ((m: Message | null) => void) | null = null;

  constructor(
    readonly clock: FakeClock,
    readonly onSend: (s: FakeSocket, parts: Uint8Array[]) => void,
  ) {
    this.lastReceivedAt = clock.now();
  }

  subscribe(): Promise<void> {
    return Promise.resolve();
  }

  send(parts: readonly Uint8Array[]): Promise<void> {
    if (this.closed) return Promise.reject(new ZmtpError("closed", "closed"));
    this.sent.push([...parts]);
    this.onSend(this, [...parts]);
    return Promise.resolve();
  }

  ping(): Promise<void> {
    this.pings++;
    return Promise.resolve();
  }

  deliver(msg: Message | null): void {
    if (msg) this.lastReceivedAt = this.clock.now();
    if (this.#waiter) {
      this.#waiter(msg);
      this.#waiter = null;
    } else this.#queue.push(msg);
  }

  receive(): Promise<Message | null> {
    if (this.closed) return Promise.resolve(null);
    if (this.#queue.length) return Promise.resolve(this.#queue.shift()!);
    return new Promise((resolve) => (this.#waiter = resolve));
  }

  close(): void {
    this.closed = true;
    this.deliver(null);
  }
}

const seqFrame = (seq: number) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(seq));
  return b;
};
const END = new Uint8Array(8).fill(0xff);
/** A batch whose one event names its number, so order is visible. */
const payload = (n: number) => encode([n, [["BlockRemoved", [n]]]]);

/** An engine: a PUB and a replay ROUTER over fake sockets. */
class FakeEngine {
  down = false;
  replay: "answer" | "silent" = "answer";
  seq = 0;
  buffer: [number, Uint8Array][] = [];
  bufferSteps = 100;
  readonly subs: FakeSocket[] = [];
  readonly dealers: FakeSocket[] = [];
  readonly changed = new Waiters();

  constructor(readonly clock: FakeClock) {}

  readonly dial: Dial = (type) => {
    if (this.down) return Promise.reject(new ZmtpError("io", "connection refused"));
    const s = new FakeSocket(this.clock, (dealer, [, start]) => this.#serve(dealer, start));
    (type === "SUB" ? this.subs : this.dealers).push(s);
    queueMicrotask(this.changed.poke);
    return Promise.resolve(s);
  };

  get sub(): FakeSocket {
    return this.subs[this.subs.length - 1];
  }

  /** Publishes the next batch (or only buffers it: a batch the subscriber misses). */
  publish(opts: { drop?: boolean } = {}): number {
    const seq = this.seq++;
    this.buffer.push([seq, payload(seq)]);
    if (this.buffer.length > this.bufferSteps) this.buffer.shift();
    if (!opts.drop) this.sub.deliver([new TextEncoder().encode("kv"), seqFrame(seq), payload(seq)]);
    return seq;
  }

  #serve(dealer: FakeSocket, start: Uint8Array): void {
    queueMicrotask(this.changed.poke);
    if (this.replay === "silent") return;
    const from = Number(new DataView(start.buffer, start.byteOffset, 8).getBigUint64(0));
    for (const [seq, p] of this.buffer) {
      if (seq >= from) dealer.deliver([new Uint8Array(0), seqFrame(seq), p]);
    }
    dealer.deliver([new Uint8Array(0), END, new Uint8Array(0)]);
  }
}

/** A started subscriber over a fake engine; `close` stops it and checks its sockets closed. */
async function setup(opts: Partial<ZmqSubscriberOptions> = {}) {
  const clock = new FakeClock();
  const engine = new FakeEngine(clock);
  const sink = new Recorder();
  const sub = new ZmqSubscriber({
    endpoint: ENDPOINT,
    replayEndpoint: REPLAY,
    clock,
    dial: engine.dial,
    heartbeatIntervalMs: 0,
    ...opts,
  }, sink);
  sub.start();
  if (!opts.signal?.aborted) await sink.until(() => sub.connected, "connected");
  return {
    clock,
    engine,
    sink,
    sub,
    async close() {
      await sub.close();
      assert.ok([...engine.subs, ...engine.dealers].every((s) => s.closed), "every socket closed");
    },
  };
}

Deno.test("subscriber: batches arrive decoded and in order", async () => {
  const t = await setup();
  for (let i = 0; i < 3; i++) t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 3, "three batches");
  assert.deepEqual(t.sink.seqs, [0, 1, 2]);
  assert.deepEqual(t.sink.batches[2].events, [{ kind: "removed", hashes: ["2"], medium: null }]);
  assert.equal(t.sub.lastSeq, 2);
  assert.deepEqual(t.sink.statuses, [{ kind: "connected", endpoint: ENDPOINT }]);
  await t.close();
});

Deno.test("subscriber: a gap is replayed from the last applied number + 1, before the next batch", async () => {
  const t = await setup();
  t.engine.publish();
  t.engine.publish({ drop: true });
  t.engine.publish({ drop: true });
  t.engine.publish();
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 5, "five batches");
  assert.deepEqual(t.sink.seqs, [0, 1, 2, 3, 4]);
  assert.deepEqual(t.engine.dealers[0].sent, [[new Uint8Array(0), seqFrame(1)]]);
  assert.deepEqual(t.sink.statuses.slice(1), [{ kind: "gap_recovered", from: 1, to: 2 }]);
  await t.close();
});

Deno.test("subscriber: without a replay endpoint a gap is reported and the stream goes on", async () => {
  const t = await setup({ replayEndpoint: null });
  t.engine.publish();
  t.engine.publish({ drop: true });
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 2, "two batches");
  assert.deepEqual(t.sink.seqs, [0, 2]);
  assert.deepEqual(t.sink.statuses[1], {
    kind: "gap_unrecoverable",
    from: 1,
    to: 1,
    missing: 1,
    reason: "no replay endpoint is configured",
  });
  assert.equal(t.engine.dealers.length, 0);
  await t.close();
});

Deno.test("subscriber: a replay buffer that moved on recovers what it still holds", async () => {
  const t = await setup();
  t.engine.bufferSteps = 3;
  t.engine.publish();
  for (let i = 0; i < 4; i++) t.engine.publish({ drop: true }); // 1..4; the buffer keeps 2..4
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 4, "four batches");
  assert.deepEqual(t.sink.seqs, [0, 3, 4, 5]);
  assert.deepEqual(t.sink.statuses[1], {
    kind: "gap_unrecoverable",
    from: 1,
    to: 4,
    missing: 2,
    reason: "the publisher's replay buffer no longer holds them",
  });
  await t.close();
});

Deno.test("subscriber: a replay that never answers is given up at its deadline", async () => {
  const t = await setup({ replayTimeoutMs: 2000 });
  t.engine.replay = "silent";
  t.engine.publish();
  t.engine.publish({ drop: true });
  t.engine.publish();
  await t.engine.changed.wait(() => t.engine.dealers[0]?.sent.length === 1, "the replay request");
  t.clock.advance(2000);
  await t.sink.until(() => t.sink.batches.length === 2, "the batch after the gap");
  assert.deepEqual(t.sink.seqs, [0, 2]);
  const gap = t.sink.statuses[1];
  assert.equal(gap.kind, "gap_unrecoverable");
  assert.match(gap.kind === "gap_unrecoverable" ? gap.reason : "", /took over 2000 ms/);
  await t.close();
});

Deno.test("subscriber: a sequence that goes back is a restarted publisher", async () => {
  const t = await setup();
  t.engine.publish();
  t.engine.publish();
  t.engine.seq = 0;
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 3, "three batches");
  assert.deepEqual(t.sink.seqs, [0, 1, 0]);
  assert.deepEqual(t.sink.statuses[1], { kind: "publisher_restarted", lastSeq: 1, seq: 0 });
  await t.close();
});

Deno.test("subscriber: reconnects with doubling delays, reset once a connection delivers", async () => {
  const clock = new FakeClock();
  const t = (() => {
    const engine = new FakeEngine(clock);
    engine.down = true;
    const sink = new Recorder();
    const sub = new ZmqSubscriber({
      endpoint: ENDPOINT,
      clock,
      dial: engine.dial,
      heartbeatIntervalMs: 0,
      reconnectInitialMs: 100,
      reconnectMaxMs: 300,
    }, sink);
    sub.start();
    return { engine, sink, sub };
  })();
  const delays = () =>
    t.sink.statuses.flatMap((s) =>
      s.kind === "connect_failed" || s.kind === "disconnected" ? [s.retryInMs] : []
    );
  for (let n = 1; n <= 4; n++) {
    await timerSet(clock, `retry ${n}`);
    clock.advance(delays()[n - 1]);
  }
  assert.deepEqual(delays(), [100, 200, 300, 300]);
  t.engine.down = false; // before the fifth try, which the last advance started
  await t.sink.until(() => t.sub.connected, "connected");
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 1, "a batch");
  t.engine.sub.deliver(null); // the publisher went away
  await t.sink.until(() => t.sink.kinds().at(-1) === "disconnected", "disconnected");
  assert.deepEqual(delays().at(-1), 100, "a connection that delivered resets the delay");
  const last = t.sink.statuses.at(-1)!;
  assert.deepEqual(
    last.kind === "disconnected" && last.reason,
    "the publisher closed the connection",
  );
  await timerSet(clock, "retry after the drop");
  clock.advance(100);
  await t.sink.until(() => t.engine.subs.length === 2 && t.sub.connected, "reconnected");
  await t.sub.close();
});

Deno.test("subscriber: heartbeats ping an idle publisher and drop a silent one", async () => {
  const t = await setup({ heartbeatIntervalMs: 1000, heartbeatTimeoutMs: 2500 });
  const first = t.engine.sub;
  t.clock.advance(1000);
  t.engine.publish(); // traffic at 1000
  t.clock.advance(2000); // pings at 2000 and 3000: 2000 ms of silence is within 2500
  assert.equal(first.pings, 3);
  assert.ok(!first.closed);
  t.clock.advance(1000); // 4000: 3000 ms of silence
  assert.ok(first.closed);
  await t.sink.until(() => t.sink.kinds().includes("disconnected"), "disconnected");
  const d = t.sink.statuses.find((s) => s.kind === "disconnected");
  assert.equal(d?.kind === "disconnected" && d.reason, "no traffic for 2500 ms");
  await t.close();
});

Deno.test("subscriber: bad framing and bad payloads are reported and skipped", async () => {
  const t = await setup();
  t.engine.publish();
  t.engine.sub.deliver([new Uint8Array(1), new Uint8Array(3)]);
  t.engine.sub.deliver([new Uint8Array(0), seqFrame(1), new Uint8Array([0xc1])]);
  t.engine.seq = 2;
  t.engine.publish();
  await t.sink.until(() => t.sink.batches.length === 2, "the good batches");
  assert.deepEqual(t.sink.seqs, [0, 2]);
  const bad = t.sink.statuses.filter((s) => s.kind === "bad_message");
  assert.equal(bad.length, 2);
  assert.match(
    JSON.stringify(bad[0]),
    /expected \[topic, 8-byte seq, payload\], got frames of 1, 3 bytes/,
  );
  assert.deepEqual(bad[1].kind === "bad_message" && bad[1].seq, 1);
  assert.ok(!t.sink.kinds().includes("gap_recovered"), "an undecodable batch is not a gap");
  await t.close();
});

Deno.test("subscriber: a sink that throws is logged and the stream goes on", async () => {
  const lines: string[] = [];
  const clock = new FakeClock();
  const engine = new FakeEngine(clock);
  const got: number[] = [];
  const waiters = new Waiters();
  let connected = false;
  const sub = new ZmqSubscriber({
    endpoint: ENDPOINT,
    clock,
    dial: engine.dial,
    heartbeatIntervalMs: 0,
    logger: createLogger({ sink: (l) => lines.push(l) }),
  }, {
    onBatch(b) {
      got.push(b.seq);
      waiters.poke();
      if (b.seq === 0) throw new Error("index broke");
    },
    onStatus(s) {
      connected ||= s.kind === "connected";
      waiters.poke();
    },
  });
  sub.start();
  await waiters.wait(() => connected, "connected");
  engine.publish();
  engine.publish();
  await waiters.wait(() => got.length === 2, "both batches");
  assert.match(lines.join("\n"), /kv event sink failed on a batch.*seq=0.*index broke/);
  await sub.close();
});

Deno.test("subscriber: close ends a wait for messages, a replay or a retry at once", async () => {
  const waiting = await setup();
  await waiting.close();

  const replaying = await setup();
  replaying.engine.replay = "silent";
  replaying.engine.publish();
  replaying.engine.publish({ drop: true });
  replaying.engine.publish();
  await replaying.engine.changed.wait(() => replaying.engine.dealers.length === 1, "the replay");
  await replaying.close();
  assert.ok(!replaying.sink.kinds().includes("gap_unrecoverable"), "a stopped replay is no loss");

  const retrying = await setup({ signal: AbortSignal.abort() });
  assert.equal(retrying.engine.subs.length, 0, "an aborted signal stops it before it starts");
  await retrying.close();
});

Deno.test("subscriber: closed while a dial is resolving, it closes the socket that arrives", async () => {
  const clock = new FakeClock();
  const dialled = Promise.withResolvers<KvSocket>();
  const socket = new FakeSocket(clock, () => {});
  const sub = new ZmqSubscriber({
    endpoint: ENDPOINT,
    clock,
    dial: () => dialled.promise,
    heartbeatIntervalMs: 0,
  }, new Recorder());
  sub.start();
  const closing = sub.close();
  dialled.resolve(socket);
  await within(closing, "close while dialling", 1000);
  assert.ok(socket.closed);
});
