/**
 * The own front's limits on its clients: the body-rate arithmetic, the sweep interval and the
 * per-address count as tables; then on raw sockets, with the front's timers on a FakeClock,
 * each limit (the connection caps, total and per address; a slowloris flood cut at the head
 * deadline, counted from accept; a later head counted from its first byte while an idle
 * keep-alive connection stays the idle timer's; a trickled body cut at its deadline, moved later
 * by the bytes received), and that ordinary keep-alive clients, a body read in pieces and a slow
 * streamed reply are untouched with every limit on.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import type { ChunkSource, Reply } from "../../lib/core/http.ts";
import {
  bodyOverdue,
  ClientCounts,
  type FrontLimits,
  type RejectReason,
  sweepInterval,
} from "../../lib/front/limits.ts";
import {
  type Front,
  type FrontHandler,
  type FrontListener,
  type FrontSocket,
} from "../../lib/front/server.ts";
import { withFrontServer } from "../support/front.ts";
import { RawClient } from "../support/raw_client.ts";
import { Waiters, within } from "../../support/wait.ts";

const enc = new TextEncoder();

Deno.test("limits: a body is overdue past its deadline plus a second per min-rate bytes", () => {
  // [now, since, bytes, timeoutMs, minRate, overdue]
  const table: [number, number, number, number, number, boolean][] = [
    [10_000, 0, 0, 10_000, 1024, false], // exactly the deadline: not yet
    [10_001, 0, 0, 10_000, 1024, true],
    [12_000, 0, 2048, 10_000, 1024, false], // 2 KiB earned 2 s
    [12_001, 0, 2048, 10_000, 1024, true],
    [1_000_000, 0, 1 << 20, 10_000, 1024, false], // 1 MiB earned 1024 s
    [11_000, 1_000, 0, 10_000, 1024, false], // counted from `since`
    [10_001, 0, 1 << 30, 10_000, 0, true], // min rate 0: a flat deadline
  ];
  for (const [now, since, bytes, ms, rate, want] of table) {
    assert.equal(bodyOverdue(now, since, bytes, ms, rate), want, `${now} ${bytes} ${rate}`);
  }
});

Deno.test("limits: the sweep runs at a quarter of the shortest deadline, 10 ms to 1 s", () => {
  // [idleMs, headMs, bodyMs, interval]
  const table: [number, number, number, number][] = [
    [60_000, 0, 0, 1000],
    [60_000, 15_000, 30_000, 1000],
    [60_000, 2_000, 0, 500],
    [60_000, 0, 400, 100],
    [60_000, 20, 0, 10],
    [200, 0, 0, 50],
  ];
  for (const [idle, head, body, want] of table) {
    assert.equal(sweepInterval(idle, head, body), want, `${idle} ${head} ${body}`);
  }
});

Deno.test("limits: client counts cap each address, free a slot on close, and 0 counts nothing", () => {
  const c = new ClientCounts(2);
  assert.ok(c.take("10.0.0.1"));
  assert.ok(c.take("10.0.0.1"));
  assert.equal(c.take("10.0.0.1"), false, "a third from one address");
  assert.ok(c.take("10.0.0.2"), "another address has its own count");
  assert.ok(c.take(undefined), "an unknown address is not counted");
  c.give("10.0.0.1");
  assert.equal(c.open("10.0.0.1"), 1);
  assert.ok(c.take("10.0.0.1"));
  for (const a of ["10.0.0.1", "10.0.0.1", "10.0.0.2"]) c.give(a);
  assert.equal(c.addresses, 0, "an address with nothing open is forgotten");
  const off = new ClientCounts(0);
  for (let i = 0; i < 10; i++) assert.ok(off.take("10.0.0.1"));
  assert.equal(off.addresses, 0);
});

/** A reply of `s`. */
const text = (s: string, status = 200): Reply => ({
  status,
  headers: [["content-type", "text/plain"]],
  body: enc.encode(s),
});

/** Answers the path; a POST's body is read, and a body error answered with its status. */
const echo: FrontHandler = async (inb) => {
  if (inb.method !== "POST") return text(`ok ${inb.path}`);
  try {
    return text(`got ${(await inb.bytes(1 << 20)).length}`);
  } catch (e) {
    if (e instanceof GatewayError) return text(e.code, e.status);
    throw e;
  }
};

/**
 * `Deno.listen`'s connections, the i-th accepted one seen as coming from `from[i]` (accept order
 * is connect order: the test connects one by one), so one loopback test has many client addresses.
 */
function addressedListener(from: string[]): FrontListener {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let i = 0;
  return {
    addr: l.addr,
    async accept(): Promise<FrontSocket> {
      const conn = await l.accept();
      const hostname = from[i++] ?? "127.0.0.1";
      return {
        read: (p) => conn.read(p),
        write: (p) => conn.write(p),
        close: () => conn.close(),
        remoteAddr: { transport: "tcp", hostname, port: conn.remoteAddr.port },
      };
    },
    close: () => l.close(),
  };
}

interface Setup {
  limits: FrontLimits;
  clock?: FakeClock;
  idleTimeoutMs?: number;
  listener?: FrontListener;
}

/** Serves `handler` with `limits`; `fn` gets the front, a client factory and the refusals. */
function withFront(
  handler: FrontHandler,
  setup: Setup,
  fn: (f: Front, client: () => Promise<RawClient>, rejected: RejectReason[]) => Promise<void>,
): Promise<void> {
  const rejected: RejectReason[] = [];
  const onReject = (r: RejectReason) => rejected.push(r);
  return withFrontServer(handler, { onReject, ...setup }, (f, client) => fn(f, client, rejected));
}

/** One GET on `c`, answered. */
async function get(c: RawClient, path = "/x"): Promise<string> {
  await c.send(`GET ${path} HTTP/1.1\r\nhost: gw\r\n\r\n`);
  return (await c.response()).body;
}

/** A request that closes its connection once answered: when it resolves, the front let go of it. */
async function lastGet(c: RawClient): Promise<void> {
  await c.send("GET /bye HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n");
  await c.response();
  assert.ok(await c.closed());
}

Deno.test("limits: past --max-connections a new connection is closed at once; a freed slot serves again", async () => {
  await withFront(echo, { limits: { maxConnections: 2 } }, async (f, client, rejected) => {
    const a = await client();
    const b = await client();
    assert.equal(await get(a), "ok /x");
    assert.equal(await get(b), "ok /x");
    const over = await client();
    await over.send("GET /x HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.ok(await within(over.closed(), "the connection over the cap closed"), "nothing sent");
    assert.deepEqual(rejected, ["max_connections"]);
    assert.equal(await get(a), "ok /x", "the open ones are served");
    await lastGet(b);
    assert.equal(f.connections, 1);
    const again = await client();
    assert.equal(await get(again), "ok /x");
    assert.deepEqual(rejected, ["max_connections"]);
  });
});

Deno.test("limits: past --max-connections-per-client an address's new connection is closed; others are served", async () => {
  const from = ["10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.1"];
  const setup = { limits: { maxConnectionsPerClient: 2 }, listener: addressedListener(from) };
  await withFront(echo, setup, async (_f, client, rejected) => {
    const [a1, a2, a3, b] = [await client(), await client(), await client(), await client()];
    assert.equal(await get(a1), "ok /x");
    assert.equal(await get(a2), "ok /x");
    assert.ok(await within(a3.closed(), "the third from 10.0.0.1 closed"), "nothing sent");
    assert.equal(await get(b), "ok /x", "10.0.0.2 has its own count");
    assert.deepEqual(rejected, ["per_client"]);
    await lastGet(a1);
    const a4 = await client();
    assert.equal(await get(a4), "ok /x", "a slot freed by 10.0.0.1 is its own again");
  });
});

Deno.test("limits: slowloris: connections trickling header lines get 408 at the head deadline from accept", async () => {
  const clock = new FakeClock();
  const n = 60;
  const setup = { limits: { headTimeoutMs: 10_000 }, clock, idleTimeoutMs: 60_000 };
  await withFront(echo, setup, async (f, client, rejected) => {
    const slow: RawClient[] = [];
    for (let i = 0; i < n; i++) {
      const c = await client();
      await c.send(`GET /slow/${i} HTTP/1.1\r\nhost: gw\r\n`);
      slow.push(c);
    }
    // Accepted in connect order: once a later client is served, every slow one is accepted.
    const probe = await client();
    assert.equal(await get(probe), "ok /x");
    for (let s = 1; s <= 2; s++) {
      clock.advance(5_000);
      for (const c of slow) await c.send(`x-line-${s}: ${"a".repeat(20)}\r\n`);
    }
    assert.deepEqual(rejected, [], "10 s after accept: not yet");
    assert.equal(f.connections, n + 1);
    clock.advance(1_000); // the next sweep
    assert.equal(rejected.length, n);
    assert.ok(rejected.every((r) => r === "head_timeout"));
    for (const c of slow) {
      const r = await within(c.response(), "the 408");
      assert.equal(r.status, 408);
      assert.equal(r.headers.get("connection"), "close");
      assert.ok(await within(c.closed(), "the slow connection closed"));
    }
    assert.equal(await get(probe), "ok /x", "an idle keep-alive client is not cut");
  });
});

Deno.test("limits: a later head's deadline runs from its first byte; a keep-alive wait stays the idle timer's", async () => {
  const clock = new FakeClock();
  const servedA = Promise.withResolvers<void>();
  const handler: FrontHandler = (inb, completed) => {
    if (inb.path === "/a") completed.then(() => servedA.resolve());
    return echo(inb, completed);
  };
  const setup = { limits: { headTimeoutMs: 10_000 }, clock, idleTimeoutMs: 60_000 };
  await withFront(handler, setup, async (_f, client, rejected) => {
    const idle = await client();
    assert.equal(await get(idle, "/k"), "ok /k");
    // /a answered, the next head is begun and never finished.
    const partial = await client();
    await partial.send("GET /a HTTP/1.1\r\nhost: gw\r\n\r\nGET /b HTTP/1.1\r\nhost: gw\r\n");
    assert.equal((await partial.response()).body, "ok /a");
    await servedA.promise;
    clock.advance(10_000);
    assert.deepEqual(rejected, [], "10 s into the head: not yet");
    clock.advance(1_000);
    assert.deepEqual(rejected, ["head_timeout"]);
    assert.equal((await within(partial.response(), "the 408")).status, 408);
    assert.ok(await within(partial.closed(), "the partial head's connection closed"));
    // The idle client, 11 s without a byte, is still served; then idle 60 s, closed silently.
    assert.equal(await get(idle, "/k"), "ok /k");
    clock.advance(61_000);
    assert.ok(await within(idle.closed(), "the idle connection closed"), "closed without a 408");
    assert.deepEqual(rejected, ["head_timeout"]);
  });
});

Deno.test("limits: a trickled body gets 408 at its deadline, later by a second per min-rate bytes", async () => {
  const clock = new FakeClock();
  const reading = Promise.withResolvers<void>();
  const handler: FrontHandler = (inb, completed) => {
    const answer = echo(inb, completed);
    reading.resolve(); // echo is in its body read now: the body's wait has begun
    return answer;
  };
  const setup = { limits: { bodyTimeoutMs: 10_000, bodyMinRate: 1000 }, clock };
  await withFront(handler, setup, async (_f, client, rejected) => {
    const c = await client();
    // 2,000 of 10,000 bytes come with the head: 2 s more than the 10 s.
    await c.send(
      `POST /b HTTP/1.1\r\nhost: gw\r\ncontent-length: 10000\r\n\r\n${"x".repeat(2000)}`,
    );
    await reading.promise;
    clock.advance(12_000);
    assert.deepEqual(rejected, [], "12 s, 2,000 bytes: not yet");
    clock.advance(1_000);
    assert.deepEqual(rejected, ["body_timeout"]);
    const r = await within(c.response(), "the 408");
    assert.equal(r.status, 408);
    assert.equal(r.body, "request_body_timeout");
    assert.equal(r.headers.get("connection"), "close");
    assert.ok(await within(c.closed(), "the slow body's connection closed"));
  });
});

Deno.test("limits: keep-alive clients, a body read in pieces and a slow streamed reply are untouched", async () => {
  const clock = new FakeClock();
  const reading = Promise.withResolvers<void>();
  // The reply's source: each read waits for the test to hand it a chunk.
  const chunks: PromiseWithResolvers<Uint8Array | null>[] = [];
  const reads = new Waiters();
  const slowSource: ChunkSource = {
    read() {
      const next = Promise.withResolvers<Uint8Array | null>();
      chunks.push(next);
      reads.poke();
      return next.promise;
    },
    cancel() {},
  };
  const handler: FrontHandler = async (inb, completed) => {
    if (inb.path !== "/stream") return echo(inb, completed);
    const body = inb.bytes(1 << 20);
    reading.resolve();
    await body;
    return { status: 200, headers: [["content-type", "text/event-stream"]], body: slowSource };
  };
  const limits: FrontLimits = {
    maxConnections: 10,
    maxConnectionsPerClient: 10,
    headTimeoutMs: 10_000,
    bodyTimeoutMs: 10_000,
    bodyMinRate: 1000,
  };
  await withFront(
    handler,
    { limits, clock, idleTimeoutMs: 60_000 },
    async (_f, client, rejected) => {
      const keep = await client();
      for (let i = 0; i < 4; i++) {
        assert.equal(await get(keep, `/k${i}`), `ok /k${i}`);
        clock.advance(30_000); // idle between requests, longer than the head deadline
      }
      // A body sent after the head, once the handler reads it; then minutes of slow reply.
      const s = await client();
      await s.send("POST /stream HTTP/1.1\r\nhost: gw\r\ncontent-length: 5\r\n\r\n");
      await reading.promise;
      await s.send("hello");
      for (let i = 0; i < 10; i++) {
        await reads.wait(() => chunks.length > i, `read ${i} of the reply's source`);
        clock.advance(30_000);
        chunks[i].resolve(enc.encode(`data: ${i}\n\n`));
        assert.equal(await get(keep, `/s${i}`), `ok /s${i}`, "keep-alive goes on meanwhile");
      }
      await reads.wait(() => chunks.length > 10, "the last read");
      chunks[10].resolve(null);
      const r = await within(s.response(), "the streamed reply");
      assert.equal(r.status, 200);
      assert.equal(r.chunks.length, 10);
      assert.deepEqual(rejected, [], "no limit struck");
    },
  );
});
