/**
 * Our replay ROUTER against our replay client (`requestReplay`) and DEALER on loopback: a replay
 * from a sequence number, one from before what is held, one past it, requests of other shapes
 * ignored, several requests on one connection, and a peer leaving mid-answer. Against libzmq's
 * DEALER in zmq_interop_test.ts.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import { dialZmtp } from "../../lib/kv/zmq_subscriber.ts";
import { requestReplay } from "../../lib/kv/replay.ts";
import { seqFrame, ZmqReplayServer } from "../../lib/kv/zmq_replay_server.ts";
import { ZmtpSocket } from "../../lib/kv/zmtp.ts";
import { until, within } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Batches 5..9, each payload `b<seq>`. */
const HELD = [5, 6, 7, 8, 9].map((seq) => [seq, enc.encode(`b${seq}`)] as const);

/** A server holding `held`. */
async function withServer(
  fn: (s: ZmqReplayServer) => Promise<void>,
  held: readonly (readonly [number, Uint8Array])[] = HELD,
): Promise<void> {
  const server = new ZmqReplayServer(
    { clock: systemClock },
    (from) => held.filter(([seq]) => seq >= from),
  );
  try {
    await fn(server);
  } finally {
    await server.close();
  }
}

const replay = (s: ZmqReplayServer, from: number, to: number) =>
  requestReplay({
    dial: dialZmtp,
    endpoint: s.endpoint,
    from,
    to,
    timeoutMs: 5000,
    clock: systemClock,
  })
    .then((got) => got.map(([seq, p]) => [seq, dec.decode(p)]));

Deno.test("zmq replay server: answers the batches held from the start asked, then the end marker", async () => {
  await withServer(async (s) => {
    const starts: number[] = [];
    const off = s.watch((from) => starts.push(from));
    // A `to` past what is held: the client reads on to the end marker.
    assert.deepEqual(await replay(s, 7, 100), [[7, "b7"], [8, "b8"], [9, "b9"]]);
    assert.deepEqual(await replay(s, 2, 100), HELD.map(([seq]) => [seq, `b${seq}`]));
    assert.deepEqual(await replay(s, 12, 100), [], "nothing past the buffer");
    await until(() => starts.length === 3, (l) => s.watch(l), "every replay answered");
    off();
    assert.deepEqual(starts, [7, 2, 12]);
  });
});

Deno.test("zmq replay server: requests of other shapes are ignored; several on one connection are answered in turn", async () => {
  await withServer(async (s) => {
    const dealer = await ZmtpSocket.connect("DEALER", s.endpoint, { clock: systemClock });
    try {
      await dealer.send([enc.encode("junk")]);
      await dealer.send([new Uint8Array(0), new Uint8Array(3)]);
      await dealer.send([new Uint8Array(0), seqFrame(9)]);
      await dealer.send([new Uint8Array(0), seqFrame(8)]);
      const got: string[] = [];
      for (let i = 0; i < 5; i++) {
        const m = (await within(dealer.receive(), "an answer"))!;
        assert.equal(m.length, 3);
        assert.equal(m[0].length, 0);
        const seq = new DataView(m[1].buffer, m[1].byteOffset, 8).getBigInt64(0);
        got.push(`${seq}:${dec.decode(m[2])}`);
      }
      assert.deepEqual(got, ["9:b9", "-1:", "8:b8", "9:b9", "-1:"]);
    } finally {
      dealer.close();
    }
  });
});

Deno.test("zmq replay server: a peer that leaves without reading a long answer is let go", async () => {
  // 64 MiB held: more than the loopback's buffers take, so the answer waits on the reader.
  const big = new Uint8Array(256 * 1024);
  const held = Array.from({ length: 256 }, (_, i) => [i, big] as const);
  await withServer(async (s) => {
    const answered: number[] = [];
    const off = s.watch((from) => answered.push(from));
    const dealer = await ZmtpSocket.connect("DEALER", s.endpoint, { clock: systemClock });
    await dealer.send([new Uint8Array(0), seqFrame(0)]);
    const first = await within(dealer.receive(), "the first batch");
    assert.equal(first![2].length, big.length);
    dealer.close();
    // The abandoned answer ends; another peer is served whole.
    const got = await requestReplay({
      dial: dialZmtp,
      endpoint: s.endpoint,
      from: 255,
      to: 1000,
      timeoutMs: 5000,
      clock: systemClock,
    });
    assert.deepEqual(got.map(([seq]) => seq), [255]);
    await until(() => answered.includes(255), (l) => s.watch(l), "the second replay");
    off();
    assert.deepEqual(answered, [255], "the abandoned replay never reached its end marker");
  }, held);
});
