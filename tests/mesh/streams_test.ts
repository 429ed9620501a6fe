/** The sync-stream manager against a scripted transport under fake time. */

import assert from "node:assert/strict";
import client from "prom-client";
import { silentLogger } from "../../lib/core/log.ts";
import { MeshMetrics } from "../../lib/mesh/mesh_metrics.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { StreamManager } from "../../lib/mesh/streams.ts";
import type {
  FrameConn,
  FrameHandlers,
  MeshTransport,
} from "../../lib/mesh/transport/transport.ts";
import type { StreamFrame } from "../../lib/mesh/wire.ts";

/** A connection whose far side the test plays. */
class ScriptedConn implements FrameConn {
  readonly remote = "test";
  sent: StreamFrame[] = [];
  accepting = true;
  closed = false;
  h!: FrameHandlers;
  listen(h: FrameHandlers): void {
    this.h = h;
  }
  send(f: StreamFrame): boolean {
    this.sent.push(f);
    return this.accepting;
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.onClose("closed");
  }
  /** The peer sends a frame. */
  deliver(from: string, body: StreamFrame["body"]): void {
    this.h.onFrame({ from, seq: 1, body });
  }
}

function setup(self = "a", alive: { name: string; address: string }[] = []) {
  const clock = new FakeClock();
  const metrics = new MeshMetrics(new client.Registry());
  const opened: ScriptedConn[] = [];
  const transport = {
    openStream: () => {
      const c = new ScriptedConn();
      opened.push(c);
      return c;
    },
  } as unknown as MeshTransport;
  const lost: string[] = [];
  const m = new StreamManager({
    self,
    transport,
    clock: clock,
    log: silentLogger,
    metrics,
    config: {
      heartbeatMs: 15_000,
      idleTimeoutMs: 60_000,
      queueSize: 4,
      roundMs: 1000,
      reopenBackoffMs: 1000,
    },
    alivePeers: () => alive,
    isLive: (name) => name !== "mallory",
    onLost: (p) => lost.push(p),
    onChange: () => {},
  });
  m.start();
  return { clock, metrics, opened, lost, m };
}

const series = (fam: { get(): { values: { labels: Record<string, string>; value: number }[] } }) =>
  Object.fromEntries(fam.get().values.map((v) => [Object.values(v.labels).join("/"), v.value]));

Deno.test("streams: only the name that sorts first opens, with a hello; open once the peer answers", () => {
  const { m, opened } = setup("b");
  m.ensure("a", "a:1");
  assert.equal(opened.length, 0, "a < b: a opens, not b");
  m.ensure("c", "c:1");
  assert.equal(opened.length, 1);
  assert.deepEqual(opened[0].sent[0].body, { kind: "hello", to: "c" });
  assert.equal(m.isOpen("c"), false);
  opened[0].deliver("c", { kind: "heartbeat" });
  assert.equal(m.isOpen("c"), true);
  m.ensure("c", "c:1");
  assert.equal(opened.length, 1, "one stream per pair");
  m.closeAll();
});

Deno.test("streams: the acceptor binds the name from hello, counts it, and rejects another name later", () => {
  const { m, metrics } = setup("b");
  const conn = new ScriptedConn();
  m.accept(conn);
  assert.deepEqual(series(metrics.peerConnections), { "": 1 });
  conn.deliver("a", { kind: "hello", to: "b" });
  assert.equal(m.isOpen("a"), true);
  assert.deepEqual(series(metrics.peerConnections), { "": 1, a: 1 });
  assert.equal(conn.sent[0].body.kind, "heartbeat", "answers so the opener knows");
  conn.deliver("mallory", { kind: "heartbeat" });
  assert.equal(conn.closed, true);
  assert.deepEqual(series(metrics.peerConnections), { "": 1, a: 0 }, "0 after the stream ends");
  assert.deepEqual(series(metrics.peerReconnects), { a: 1 });
  assert.deepEqual(series(metrics.rejected), { identity: 1 });
  // A first frame that is not a hello for us, or that uses our name, is refused too.
  const wrong = new ScriptedConn();
  m.accept(wrong);
  wrong.deliver("a", { kind: "hello", to: "z" });
  assert.equal(wrong.closed, true);
  const twin = new ScriptedConn();
  m.accept(twin);
  twin.deliver("b", { kind: "hello", to: "b" });
  assert.equal(twin.closed, true);
  assert.equal(series(metrics.rejected).name_conflict, 1);
  m.closeAll();
});

Deno.test("streams: a full queue drops and counts; drain sends the rest in order", () => {
  const { m, opened, metrics } = setup("a");
  m.ensure("b", "b:1");
  const c = opened[0];
  c.deliver("b", { kind: "heartbeat" });
  c.accepting = false;
  const payload = new Uint8Array([1]);
  assert.equal(m.send("b", "crdt_batch", payload), true, "taken; the transport is now full");
  for (let i = 0; i < 4; i++) assert.equal(m.send("b", "crdt_batch", payload), true, "queued");
  assert.equal(m.send("b", "crdt_batch", payload), false, "over the queue size");
  assert.deepEqual(series(metrics.droppedFrames), { "b/out": 1 });
  const before = c.sent.length;
  c.accepting = true;
  c.h.onDrain();
  assert.equal(c.sent.length, before + 4);
  assert.deepEqual(c.sent.slice(-4).map((f) => f.seq), [3, 4, 5, 6]);
  m.closeAll();
});

Deno.test("streams: inbound envelopes are delivered in batches and a flood beyond the queue is dropped", () => {
  const { m, clock, metrics } = setup("b");
  const got: number[] = [];
  m.onEnvelope((peer, _t, p) => {
    assert.equal(peer, "a");
    got.push(p[0]);
  });
  const conn = new ScriptedConn();
  m.accept(conn);
  conn.deliver("a", { kind: "hello", to: "b" });
  for (let i = 0; i < 6; i++) {
    conn.deliver("a", { kind: "envelope", type: "digest", payload: new Uint8Array([i]) });
  }
  clock.advance(0);
  assert.deepEqual(got, [0, 1, 2, 3]);
  assert.deepEqual(series(metrics.droppedFrames), { "a/in": 2 });
  conn.deliver("a", { kind: "unknown" });
  assert.equal(series(metrics.rejected).unknown_frame, 1);
  m.closeAll();
});

Deno.test("streams: heartbeats keep an idle stream open; a silent one closes, is reported, and reopens with backoff", () => {
  const peers = [{ name: "b", address: "b:1" }];
  const { m, clock, opened, lost, metrics } = setup("a", peers);
  m.ensure("b", "b:1");
  const c = opened[0];
  c.deliver("b", { kind: "heartbeat" });
  // The peer answers every 15 s: five idle minutes and the stream is still the first one.
  for (let t = 0; t < 20; t++) {
    clock.advance(15_000);
    c.deliver("b", { kind: "heartbeat" });
  }
  assert.equal(opened.length, 1);
  assert.ok(c.sent.filter((f) => f.body.kind === "heartbeat").length >= 19, "we heartbeat too");
  // Now the peer goes silent: closed at the idle timeout and reported.
  clock.advance(60_000);
  assert.equal(c.closed, true);
  assert.deepEqual(lost, ["b"]);
  assert.equal(opened.length, 1, "no reopen before the backoff");
  clock.advance(1000);
  assert.equal(opened.length, 2, "reopened once the backoff passed, the peer still ALIVE");
  opened[1].close(); // fails again before the peer answered: the backoff doubles
  clock.advance(1000);
  assert.equal(opened.length, 2);
  clock.advance(1000);
  assert.equal(opened.length, 3);
  assert.deepEqual(series(metrics.syncRound).b !== undefined, true);
  m.closeAll();
});

Deno.test("streams: closing on purpose (the peer went DOWN) is not reported as lost", () => {
  const { m, opened, lost } = setup("a");
  m.ensure("b", "b:1");
  opened[0].deliver("b", { kind: "heartbeat" });
  m.drop("b", "DOWN");
  assert.equal(opened[0].closed, true);
  assert.deepEqual(lost, []);
  m.closeAll();
});

Deno.test("streams: only live members may bind a stream; a blocked stream queues no heartbeats", () => {
  const { m, metrics, opened, clock } = setup("b", [{ name: "c", address: "c:1" }]);
  const conn = new ScriptedConn();
  m.accept(conn);
  conn.deliver("mallory", { kind: "hello", to: "b" });
  assert.equal(conn.closed, true);
  assert.equal(series(metrics.rejected).identity, 1);
  assert.equal(series(metrics.peerConnections).mallory, undefined, "no series for strangers");
  m.ensure("c", "c:1");
  const c = opened[0];
  c.deliver("c", { kind: "heartbeat" });
  c.accepting = false;
  m.send("c", "digest", new Uint8Array(1)); // now blocked
  const before = c.sent.length;
  for (let i = 0; i < 10; i++) {
    clock.advance(15_000);
    c.deliver("c", { kind: "heartbeat" });
  }
  assert.equal(c.sent.length, before, "nothing written while blocked");
  assert.equal(series(metrics.droppedFrames)["c/out"], undefined, "and nothing dropped");
  m.closeAll();
});
