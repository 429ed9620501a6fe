/**
 * Our PUB against our SUB client on loopback: topic prefix filtering, several subscribers,
 * cancellations, a subscriber that leaves, one too slow to read losing messages at the
 * high-water mark while a fast one gets them all, a peer of the wrong type or no handshake at
 * all dropped, ZMTP 3.1's SUBSCRIBE read like 3.0's, and close ending every subscriber. Against
 * libzmq's SUB in zmq_interop_test.ts.
 */

import assert from "node:assert/strict";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { ZmqPub } from "../../lib/kv/zmq_pub.ts";
import type { ZmtpServerOptions } from "../../lib/kv/zmtp_server.ts";
import { ZmtpSocket } from "../../lib/kv/zmtp.ts";
import { parseSubscription, subscriptionMessage } from "../../lib/kv/zmtp_codec.ts";
import { until, within } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A PUB and its subscribers, all closed afterwards. */
async function withPub(
  fn: (pub: ZmqPub, sub: (...prefixes: string[]) => Promise<ZmtpSocket>) => Promise<void>,
  opts: Partial<ZmtpServerOptions> = {},
): Promise<void> {
  const pub = new ZmqPub({ clock: systemClock, ...opts });
  const subs: ZmtpSocket[] = [];
  /** A SUB subscribed to `prefixes`, once the PUB has them all. */
  const sub = async (...prefixes: string[]) => {
    const before = pub.subscribers;
    const s = await ZmtpSocket.connect("SUB", pub.endpoint, { clock: systemClock });
    subs.push(s);
    for (const p of prefixes) await s.subscribe(p);
    if (prefixes.length > 0) {
      await until(() => pub.subscribers > before, (l) => pub.watch(l), "the subscription");
    }
    return s;
  };
  try {
    await fn(pub, sub);
  } finally {
    for (const s of subs) s.close();
    await pub.close();
  }
}

/** The next message's frames as text. */
async function next(s: ZmtpSocket): Promise<string[] | null> {
  const m = await within(s.receive(), "a message");
  return m && m.map((f) => dec.decode(f));
}

const msg = (...parts: string[]) => parts.map((p) => enc.encode(p));

Deno.test("zmq pub: subscribers get the messages whose topic starts with one of their prefixes", async () => {
  await withPub(async (pub, sub) => {
    const kv = await sub("kv");
    const other = await sub("other");
    const all = await sub("");
    assert.equal(pub.subscribers, 3);
    assert.equal(pub.publish(msg("kv-1", "a")), 2);
    assert.equal(pub.publish(msg("other", "b")), 2);
    assert.equal(pub.publish(msg("x", "c")), 1);
    assert.equal(pub.publish(msg("kv", "end")), 2);
    pub.publish(msg("other", "end"));
    // One connection keeps order: a message that did not come before the end never comes.
    assert.deepEqual([await next(kv), await next(kv)], [["kv-1", "a"], ["kv", "end"]]);
    assert.deepEqual([await next(other), await next(other)], [["other", "b"], ["other", "end"]]);
    const got = [];
    for (let i = 0; i < 5; i++) got.push((await next(all))![1]);
    assert.deepEqual(got, ["a", "b", "c", "end", "end"]);
    assert.equal(pub.dropped, 0);
  });
});

Deno.test("zmq pub: a connected peer gets nothing before it subscribes, and a cancel removes one subscription", async () => {
  await withPub(async (pub, sub) => {
    const s = await sub();
    assert.equal(pub.publish(msg("kv", "early")), 0);
    await s.subscribe("kv");
    await s.subscribe("kv");
    await until(() => pub.subscribers === 1, (l) => pub.watch(l), "the subscriptions");
    let changes = 0;
    const off = pub.watch(() => changes++);
    await s.unsubscribe("kv");
    await until(() => changes === 1, (l) => pub.watch(l), "the first cancel");
    assert.equal(pub.publish(msg("kv", "still")), 1, "one of two subscriptions is left");
    await s.unsubscribe("kv");
    await until(() => pub.subscribers === 0, (l) => pub.watch(l), "the second cancel");
    off();
    assert.equal(pub.publish(msg("kv", "gone")), 0);
    await s.subscribe("z");
    await until(() => pub.subscribers === 1, (l) => pub.watch(l), "a new subscription");
    pub.publish(msg("z", "after"));
    assert.deepEqual([await next(s), await next(s)], [["kv", "still"], ["z", "after"]]);
  });
});

Deno.test("zmq pub: a subscriber that leaves is forgotten; the others go on", async () => {
  await withPub(async (pub, sub) => {
    const a = await sub("");
    const b = await sub("");
    pub.publish(msg("t", "1"));
    assert.deepEqual(await next(a), ["t", "1"]);
    a.close();
    await until(() => pub.subscribers === 1, (l) => pub.watch(l), "the departure");
    assert.equal(pub.publish(msg("t", "2")), 1);
    assert.deepEqual([await next(b), await next(b)], [["t", "1"], ["t", "2"]]);
    assert.equal(pub.dropped, 0);
  });
});

Deno.test("zmq pub: a subscriber that does not read loses messages at its high-water mark; a fast one gets every one", async () => {
  await withPub(async (pub, sub) => {
    const slow = await sub("");
    const fast = await sub("");
    const body = new Uint8Array(256 * 1024).fill(7);
    // 64 MiB: far past what the loopback's socket buffers hold for the reader that never reads.
    const n = 256;
    for (let i = 0; i < n; i++) {
      pub.publish([enc.encode("t"), enc.encode(String(i)), body]);
      const m = await within(fast.receive(), `message ${i}`);
      assert.equal(dec.decode(m![1]), String(i));
    }
    assert.ok(pub.dropped > 0, "the slow subscriber lost messages");
    assert.ok(pub.dropped <= n - 4, `at most n minus the high-water mark: ${pub.dropped}`);
    // What it does get is in order, from the first on.
    const first = await within(slow.receive(), "the slow subscriber's first message");
    assert.equal(dec.decode(first![1]), "0");
  }, { sendHighWaterMark: 4 });
});

Deno.test("zmq pub: a DEALER is refused, and a connection silent past the handshake deadline is dropped", async () => {
  const clock = new FakeClock();
  await withPub(async (pub) => {
    await assert.rejects(
      ZmtpSocket.connect("DEALER", pub.endpoint, { clock: systemClock }),
      /cannot talk to a "PUB"/,
    );
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: pub.port });
    try {
      const greeting = new Uint8Array(64);
      let got = 0;
      while (got < 64) {
        const n = await conn.read(greeting.subarray(got));
        assert.notEqual(n, null);
        got += n!;
      }
      assert.equal(greeting[0], 0xff);
      clock.advance(1000);
      assert.equal(await within(conn.read(new Uint8Array(16)), "the server's close"), null);
    } finally {
      conn.close();
    }
    assert.equal(pub.subscribers, 0);
  }, { clock, handshakeTimeoutMs: 1000 });
});

Deno.test("zmq pub: ZMTP 3.1's SUBSCRIBE and CANCEL read as 3.0's subscription messages", () => {
  const data = enc.encode("kv");
  assert.deepEqual(parseSubscription(subscriptionMessage({ name: "SUBSCRIBE", data })!), {
    subscribe: true,
    prefix: data,
  });
  assert.deepEqual(parseSubscription(subscriptionMessage({ name: "CANCEL", data })!), {
    subscribe: false,
    prefix: data,
  });
  assert.equal(subscriptionMessage({ name: "PING", data }), null);
  assert.equal(parseSubscription([enc.encode("\x02x")]), null);
  assert.equal(parseSubscription([new Uint8Array([1]), new Uint8Array(0)]), null);
});

Deno.test("zmq pub: close ends every subscriber's connection", async () => {
  const pub = new ZmqPub({ clock: systemClock });
  const s = await ZmtpSocket.connect("SUB", pub.endpoint, { clock: systemClock });
  try {
    await s.subscribe("");
    await until(() => pub.subscribers === 1, (l) => pub.watch(l), "the subscription");
    const receiving = s.receive();
    await within(pub.close(), "close");
    assert.equal(await within(receiving, "the end of the stream"), null);
  } finally {
    s.close();
    await pub.close();
  }
});
