/**
 * The own HTTP/1.1 front on raw sockets: keep-alive and close, HTTP/1.0, pipelining, sized and
 * chunked request bodies, `Expect: 100-continue`, bad heads (400, 431, 501, 505), HEAD, sized,
 * chunked and close-delimited replies, a body the handler left unread, the client leaving while
 * its request waits and while its stream runs, the idle timeout, and shutdown.
 */

import assert from "node:assert/strict";
import { type Clock, FakeClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import type { ChunkSource, Reply } from "../../lib/core/http.ts";
import type { FrontInbound } from "../../lib/front/request.ts";
import type { Front, FrontHandler } from "../../lib/front/server.ts";
import { withFrontServer } from "../support/front.ts";
import { RawClient } from "../support/raw_client.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A reply of `text`. */
const text = (s: string, status = 200): Reply => ({
  status,
  headers: [["content-type", "text/plain"]],
  body: enc.encode(s),
});

/** Echoes method, path and body back. */
const echo: FrontHandler = async (inb) => {
  const body = inb.method === "POST" ? dec.decode(await inb.bytes(1 << 20)) : "";
  return text(`${inb.method} ${inb.path} ${body}`);
};

function withFront(
  handler: FrontHandler,
  fn: (f: Front, client: () => Promise<RawClient>) => Promise<void>,
  opts: { idleTimeoutMs?: number; maxHeadBytes?: number; clock?: Clock } = {},
): Promise<void> {
  return withFrontServer(handler, opts, fn);
}

const post = (path: string, body: string, extra = "") =>
  `POST ${path} HTTP/1.1\r\nhost: gw\r\ncontent-length: ${
    enc.encode(body).length
  }\r\n${extra}\r\n${body}`;

Deno.test("front: keep-alive serves several requests on one connection, sized replies", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    for (let i = 0; i < 3; i++) {
      await c.send(post("/v1/completions", `{"n":${i}}`));
      const r = await c.response();
      assert.equal(r.status, 200);
      assert.equal(r.body, `POST /v1/completions {"n":${i}}`);
      assert.equal(r.headers.get("content-length"), String(r.body.length));
      assert.ok(r.headers.get("date"));
      assert.equal(r.headers.get("connection"), undefined);
    }
  });
});

Deno.test("front: pipelined requests are answered in order", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    await c.send(post("/a", "1") + "GET /b?x=1 HTTP/1.1\r\nhost: gw\r\n\r\n" + post("/c", "3"));
    assert.equal((await c.response()).body, "POST /a 1");
    assert.equal((await c.response()).body, "GET /b ");
    assert.equal((await c.response()).body, "POST /c 3");
  });
});

Deno.test("front: a head that arrives byte by byte is read whole", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    for (const b of enc.encode(post("/slow", "body"))) await c.send(new Uint8Array([b]));
    assert.equal((await c.response()).body, "POST /slow body");
  });
});

Deno.test("front: Connection: close and HTTP/1.0 close after the reply; 1.0 keep-alive stays", async () => {
  await withFront(echo, async (_f, client) => {
    const a = await client();
    await a.send("GET /x HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n");
    const ra = await a.response();
    assert.equal(ra.headers.get("connection"), "close");
    assert.ok(await a.closed());

    const b = await client();
    await b.send("GET /y HTTP/1.0\r\n\r\n");
    assert.equal((await b.response()).body, "GET /y ");
    assert.ok(await b.closed());

    const k = await client();
    for (let i = 0; i < 2; i++) {
      await k.send("GET /z HTTP/1.0\r\nconnection: keep-alive\r\n\r\n");
      const r = await k.response();
      assert.equal(r.headers.get("connection"), "keep-alive");
      assert.equal(r.body, "GET /z ");
    }
  });
});

Deno.test("front: a chunked request body is decoded, whatever its pieces", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    const wire =
      "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ntransfer-encoding: chunked\r\n\r\n" +
      "5;ext=1\r\nhello\r\n8\r\n, wörld\r\n0\r\ntrailer: x\r\n\r\n";
    const bytes = enc.encode(wire);
    for (let i = 0; i < bytes.length; i += 7) await c.send(bytes.subarray(i, i + 7));
    assert.equal((await c.response()).body, "POST /v1/chat/completions hello, wörld");
    await c.send(post("/next", "ok"));
    assert.equal((await c.response()).body, "POST /next ok", "the connection is reusable after");
  });
});

Deno.test("front: Expect: 100-continue gets 100 Continue before the body is sent", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    await c.send(
      "POST /e HTTP/1.1\r\nhost: gw\r\ncontent-length: 4\r\nexpect: 100-continue\r\n\r\n",
    );
    const interim = await c.head();
    assert.equal(interim.status, 100);
    await c.send("data");
    const r = await c.response();
    assert.equal(r.status, 200);
    assert.equal(r.body, "POST /e data");
  });
});

Deno.test("front: malformed heads get 400, 431, 501 or 505 and the connection closes", async () => {
  const cases: [string, number][] = [
    ["NOT A REQUEST LINE AT ALL\r\n\r\n", 400],
    ["GET /x HTTP/2.0\r\n\r\n", 505],
    ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505],
    ["POST /x HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n", 501],
    ["POST /x HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n", 400],
    ["POST /x HTTP/1.1\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n", 400],
    ["GET /x HTTP/1.1\r\nbad header\r\n\r\n", 400],
    ["GET /x HTTP/1.1\r\nx-big: " + "a".repeat(2000) + "\r\n\r\n", 431],
    // Framing a proxy in front could read otherwise (request smuggling):
    ["POST /x HTTP/1.1\r\ncontent-length: 2\r\n 0\r\n\r\nab", 400], // folded line
    ["POST /x HTTP/1.1\r\ncontent-length: 2\x0b\r\n\r\nab", 400], // vertical tab
    ["POST /x HTTP/1.1\r\ntransfer-encoding: \x0bchunked\r\n\r\n0\r\n\r\n", 400],
    ["POST /x HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", 400],
    ["GET /x HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", 400],
    // An absolute-form target that is no URL (a handler building a `Request` threw: 500):
    ["GET http://[::1/x HTTP/1.1\r\n\r\n", 400],
  ];
  let calls = 0;
  await withFront(
    async (inb) => (calls++, await echo(inb, Promise.resolve())),
    async (_f, client) => {
      for (const [wire, status] of cases) {
        const c = await client();
        await c.send(wire);
        const r = await c.response();
        assert.equal(r.status, status, wire.slice(0, 40));
        assert.equal(r.headers.get("connection"), "close");
        assert.ok(await c.closed());
      }
    },
    { maxHeadBytes: 1024 },
  );
  assert.equal(calls, 0, "the gateway never saw them");
});

Deno.test("front: a bad chunk-size line is a 400, and empty lines before a request are skipped", async () => {
  await withFront(echo, async (_f, client) => {
    const c = await client();
    await c.send("\r\n\r\nGET /after-blank HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).body, "GET /after-blank ");
    await c.send(post("/a", "1") + "\r\n");
    assert.equal((await c.response()).body, "POST /a 1");
    await c.send("GET /b HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).body, "GET /b ", "a stray CRLF after a body is not an error");
    const d = await client();
    await d.send("POST /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2 junk\r\nab\r\n0\r\n\r\n");
    assert.equal((await d.response()).status, 500, "echo's body read failed (400 from bytes())");
  });
});

Deno.test("front: HEAD gets the head without the body", async () => {
  await withFront(() => Promise.resolve(text("not sent")), async (_f, client) => {
    const c = await client();
    await c.send("HEAD /health HTTP/1.1\r\nhost: gw\r\n\r\n");
    const r = await c.response(true);
    assert.equal(r.headers.get("content-length"), "8");
    await c.send("GET /health HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).body, "not sent", "no stray body bytes came first");
  });
});

/** A chunk source of `parts`, recording a cancel. */
function source(parts: string[]): ChunkSource & { cancelled: boolean } {
  let i = 0;
  return {
    cancelled: false,
    read() {
      return Promise.resolve(i < parts.length ? enc.encode(parts[i++]) : null);
    },
    cancel() {
      this.cancelled = true;
    },
  };
}

Deno.test("front: a streamed reply is chunked for 1.1 and close-delimited for 1.0", async () => {
  const parts = ["data: a\n\n", "data: b\n\n", "data: [DONE]\n\n"];
  const stream = (): Promise<Reply> =>
    Promise.resolve({
      status: 200,
      headers: [["content-type", "text/event-stream"]],
      body: source(parts),
    });
  await withFront(stream, async (_f, client) => {
    const c = await client();
    await c.send("GET /s HTTP/1.1\r\nhost: gw\r\n\r\n");
    const r = await c.response();
    assert.equal(r.headers.get("transfer-encoding"), "chunked");
    assert.equal(r.headers.get("content-length"), undefined);
    assert.equal(r.body, parts.join(""));
    assert.deepEqual(r.chunks, parts.map((p) => p.length));
    const old = await client();
    await old.send("GET /s HTTP/1.0\r\n\r\n");
    const r0 = await old.response();
    assert.equal(r0.headers.get("transfer-encoding"), undefined);
    assert.equal(r0.body, parts.join(""));
    assert.ok(old.eof);
  });
});

Deno.test("front: a source that knows its end gets the same framing, and is read to its null", async () => {
  const parts = ["data: a\n\n", "data: [DONE]\n\n"];
  let i = 0;
  let nulls = 0;
  const knowing: ChunkSource = {
    get done() {
      return i >= parts.length;
    },
    read() {
      if (i < parts.length) return Promise.resolve(enc.encode(parts[i++]));
      nulls++;
      return Promise.resolve(null);
    },
    cancel() {},
  };
  const reply = () => Promise.resolve<Reply>({ status: 200, headers: [], body: knowing });
  await withFront(reply, async (_f, client) => {
    const c = await client();
    await c.send("GET /s HTTP/1.1\r\nhost: gw\r\n\r\n");
    const r = await c.response();
    assert.equal(r.body, parts.join(""));
    assert.deepEqual(r.chunks, parts.map((p) => p.length));
    assert.equal(nulls, 1);
    await c.send("GET /s HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).status, 200, "the connection is in step after it");
  });
});

Deno.test("front: a streamed reply to an HTTP/1.0 keep-alive client says close, and closes", async () => {
  const replies = [["data: a\n\n"], []];
  let n = 0;
  const stream = () =>
    Promise.resolve<Reply>({ status: 200, headers: [], body: source(replies[n++ % 2]) });
  await withFront(stream, async (_f, client) => {
    for (const expected of ["data: a\n\n", ""]) {
      const c = await client();
      await c.send("GET /s HTTP/1.0\r\nconnection: keep-alive\r\n\r\n");
      const r = await c.response();
      assert.equal(r.headers.get("connection"), "close");
      assert.equal(r.body, expected);
      assert.ok(c.eof);
    }
  });
});

Deno.test("front: a ReadableStream reply is relayed too", async () => {
  const reply = (): Promise<Reply> =>
    Promise.resolve({
      status: 200,
      headers: [],
      body: new Blob(["x".repeat(100_000)]).stream(),
    });
  await withFront(reply, async (_f, client) => {
    const c = await client();
    await c.send("GET /s HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).body.length, 100_000);
  });
});

Deno.test("front: a body the handler did not read closes the connection after the reply", async () => {
  await withFront(() => Promise.resolve(text("no", 404)), async (_f, client) => {
    const c = await client();
    await c.send(post("/unknown", "x".repeat(1000)));
    const r = await c.response();
    assert.equal(r.status, 404);
    assert.equal(r.headers.get("connection"), "close");
    assert.ok(await c.closed());
  });
});

Deno.test("front: a body over the handler's limit is a 413 from bytes()", async () => {
  const limited: FrontHandler = async (inb) => {
    try {
      await inb.bytes(10);
      return text("read");
    } catch (e) {
      return text((e as GatewayError).code, (e as GatewayError).status);
    }
  };
  await withFront(limited, async (_f, client) => {
    const c = await client();
    await c.send(post("/big", "x".repeat(11)));
    const r = await c.response();
    assert.equal(r.status, 413);
    assert.equal(r.body, "payload_too_large");
    const d = await client();
    const big = "b".repeat(11);
    await d.send(
      `POST /big HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nb\r\n${big}\r\n0\r\n\r\n`,
    );
    assert.equal((await d.response()).status, 413);
  });
});

Deno.test("front: a 1 MB body each way", async () => {
  const big = "z".repeat(1 << 20);
  await withFront(async (inb) => text(dec.decode(await inb.bytes(2 << 20))), async (_f, client) => {
    const c = await client();
    await c.send(post("/big", big));
    assert.equal((await c.response()).body, big);
  });
});

Deno.test("front: a client that leaves while its request waits fires gone, and completed settles", async () => {
  const seen = Promise.withResolvers<FrontInbound>();
  const completed = Promise.withResolvers<void>();
  const waiting: FrontHandler = async (inb, done) => {
    await inb.bytes(100);
    done.then(() => completed.resolve());
    seen.resolve(inb);
    await new Promise<void>((r) => inb.gone.on(r));
    return text("nobody reads this");
  };
  await withFront(waiting, async (_f, client) => {
    const c = await client();
    await c.send(post("/wait", "{}"));
    const inb = await seen.promise;
    assert.equal(inb.gone.aborted, false);
    c.close();
    await completed.promise;
    assert.equal(inb.gone.aborted, true);
  });
});

Deno.test("front: a client that leaves before its body is read (queued) fires gone", async () => {
  const seen = Promise.withResolvers<FrontInbound>();
  const queued: FrontHandler = async (inb) => {
    seen.resolve(inb);
    await new Promise<void>((r) => inb.gone.on(r)); // an admission queue, say
    return text("nobody reads this");
  };
  await withFront(queued, async (_f, client) => {
    const c = await client();
    await c.send(post("/queued", "{}"));
    const inb = await seen.promise;
    c.close();
    await new Promise<void>((r) => inb.gone.on(r));
    assert.equal(inb.consumed, false);
  });
});

Deno.test("front: a client that sends more bytes, then leaves, is still seen leaving", async () => {
  const seen = Promise.withResolvers<FrontInbound>();
  const waiting: FrontHandler = async (inb) => {
    await inb.bytes(100);
    seen.resolve(inb);
    await new Promise<void>((r) => inb.gone.on(r));
    return text("nobody reads this");
  };
  await withFront(waiting, async (_f, client) => {
    const c = await client();
    await c.send(post("/wait", "{}"));
    const inb = await seen.promise;
    await c.send("\r\nGET /pipelined HTTP/1.1\r\nhost: gw\r\n\r\n");
    c.close();
    await new Promise<void>((r) => inb.gone.on(r));
  });
});

Deno.test("front: a client that leaves mid-stream cancels the stream's source", async () => {
  const started = Promise.withResolvers<void>();
  const cancelled = Promise.withResolvers<void>();
  let reads = 0;
  const endless: ChunkSource = {
    read() {
      if (reads++ === 1) started.resolve();
      return Promise.resolve(enc.encode("data: x\n\n"));
    },
    cancel: () => cancelled.resolve(),
  };
  const reply = () => Promise.resolve<Reply>({ status: 200, headers: [], body: endless });
  await withFront(reply, async (_f, client) => {
    const c = await client();
    await c.send("GET /s HTTP/1.1\r\nhost: gw\r\n\r\n");
    await c.head();
    await started.promise;
    c.close();
    await cancelled.promise;
  });
});

Deno.test("front: a handler that throws answers 500 and the connection goes on", async () => {
  let n = 0;
  const flaky: FrontHandler = () => {
    if (n++ === 0) return Promise.reject(new Error("boom"));
    return Promise.resolve(text("fine"));
  };
  await withFront(flaky, async (_f, client) => {
    const c = await client();
    await c.send("GET /a HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).status, 500);
    await c.send("GET /a HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await c.response()).body, "fine");
  });
});

Deno.test("front: a connection idle past the timeout is closed, not before", async () => {
  const clock = new FakeClock();
  await withFront(echo, async (f, client) => {
    const c = await client();
    await c.send("GET /a HTTP/1.1\r\nhost: gw\r\n\r\n");
    await c.response();
    clock.advance(30_000);
    assert.equal(f.connections, 1, "idle for exactly the timeout: still open");
    clock.advance(1_000); // the next sweep
    assert.ok(await c.closed());
    assert.equal(f.connections, 0);
  }, { idleTimeoutMs: 30_000, clock });
});

Deno.test("front: shutdown closes idle connections, lets a busy one finish with close, then resolves", async () => {
  const release = Promise.withResolvers<void>();
  const busy = Promise.withResolvers<void>();
  const handler: FrontHandler = async (inb) => {
    if (inb.path === "/slow") {
      busy.resolve();
      await release.promise;
    }
    return text("done");
  };
  await withFront(handler, async (f, client) => {
    const idle = await client();
    await idle.send("GET /fast HTTP/1.1\r\nhost: gw\r\n\r\n");
    await idle.response();
    const slow = await client();
    await slow.send("GET /slow HTTP/1.1\r\nhost: gw\r\n\r\n");
    await busy.promise;
    let finished = false;
    const stopping = f.shutdown().then(() => (finished = true));
    assert.ok(await idle.closed(), "the idle connection is closed at once");
    assert.equal(finished, false, "shutdown waits for the busy request");
    release.resolve();
    const r = await slow.response();
    assert.equal(r.body, "done");
    assert.equal(r.headers.get("connection"), "close");
    assert.ok(await slow.closed());
    await stopping;
    await assert.rejects(RawClient.connect(f.addr.port), "no new connections");
  });
});
