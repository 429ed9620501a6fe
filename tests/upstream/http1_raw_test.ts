/**
 * `Http1Client` against raw servers that write exactly the bytes a case needs: reuse and close,
 * a worker that closes an idle connection as the next request arrives (resent once, not a
 * failure), slow and interim heads, bodies sized, chunked (extensions, trailers, any split) and
 * to the close, truncated bodies, oversized and malformed heads, resets mid-stream, timeouts
 * and cancellation.
 */

import assert from "node:assert/strict";
import net from "node:net";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { Http1Client, type Http1Options } from "../../lib/upstream/http1.ts";
import { readAll, UpstreamError, type UpstreamResponse } from "../../lib/upstream/types.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import { type RawConn, RawServer, sized } from "../support/raw_server.ts";
import { Waiters } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function client(o: Partial<Http1Options> = {}) {
  const counts = { resends: 0 };
  const c = new Http1Client({
    idleTimeoutMs: 3000,
    onResend: () => counts.resends++,
    clock: systemClock,
    ...o,
  });
  return { c, counts };
}

function post(c: Http1Client, base: string, body = "hello", cancel = new Cancel()) {
  return c.send({
    base,
    path: "/v1/completions",
    method: "POST",
    headers: [["content-type", "text/plain"]],
    body: enc.encode(body),
    cancel,
  });
}

async function text(r: UpstreamResponse): Promise<string> {
  return dec.decode(await readAll(r.body));
}

async function rejectsWith(p: Promise<unknown>, kind: UpstreamError["kind"], re?: RegExp) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof UpstreamError, `an UpstreamError, got ${e}`);
    assert.equal(e.kind, kind, e.message);
    if (re) assert.match(e.message, re);
    return true;
  });
}

/** Answers every request on every connection with `reply(request, conn)`. */
function serve(reply: (req: string, c: RawConn) => string | null) {
  return new RawServer(async (c) => {
    for (let req = await c.request(); req !== null; req = await c.request()) {
      const out = reply(req, c);
      if (out === null) return;
      await c.send(out);
    }
  });
}

async function with_<T>(s: RawServer, c: Http1Client, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    c.close();
    await s.close();
  }
}

Deno.test("http1: one write per request; a sized response is whole and the connection is reused", async () => {
  const seen: string[] = [];
  const s = serve((req) => (seen.push(req), sized(`echo ${req.length}`)));
  const { c, counts } = client();
  await with_(s, c, async () => {
    for (let i = 0; i < 3; i++) {
      const r = await post(c, s.url, `body-${i}`);
      assert.equal(r.status, 200);
      assert.ok(r.body.whole, "a sized body already in the buffer is whole");
      assert.match(await text(r), /^echo \d+$/);
    }
    assert.equal(s.accepted, 1, "one connection for three requests");
    assert.equal(counts.resends, 0);
    assert.match(seen[0], /^POST \/v1\/completions HTTP\/1\.1\r\nhost: 127\.0\.0\.1:\d+\r\n/);
    assert.match(seen[0], /\r\ncontent-length: 6\r\ncontent-type: text\/plain\r\n\r\nbody-0$/);
  });
});

Deno.test("http1: a base URL's path prefix is kept before the request path", async () => {
  let line = "";
  const s = serve((req) => ((line = req.split("\r\n")[0]), sized("ok")));
  const { c } = client();
  await with_(s, c, async () => {
    await text(await post(c, `${s.url}/prefix/`));
    assert.equal(line, "POST /prefix/v1/completions HTTP/1.1");
  });
});

Deno.test("http1: `connection: close` and HTTP/1.0 responses are not reused", async () => {
  let n = 0;
  const s = serve(() =>
    n++ % 2 === 0
      ? sized("closing", "connection: close\r\n")
      : "HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\nold"
  );
  const { c, counts } = client();
  await with_(s, c, async () => {
    assert.equal(await text(await post(c, s.url)), "closing");
    assert.equal(await text(await post(c, s.url)), "old");
    assert.equal(await text(await post(c, s.url)), "closing");
    assert.equal(s.accepted, 3);
    assert.equal(counts.resends, 0);
    assert.equal(c.idleCount, 0);
  });
});

Deno.test("http1: a body without length is read to the close", async () => {
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\npart one, ");
    await k.send("part two");
  });
  const { c } = client();
  await with_(s, c, async () => {
    assert.equal(await text(await post(c, s.url)), "part one, part two");
    assert.equal(c.idleCount, 0);
  });
});

Deno.test("http1: chunked bodies with extensions and trailers, split at every byte, decode exactly", async () => {
  const wire = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" +
    "5;name=value\r\nhello\r\n1\r\n \r\nC\r\nworld, ünï\r\n0\r\nx-trailer: t\r\n\r\n";
  const bytes = enc.encode(wire);
  for (const step of [1, 2, 3, 7, bytes.length]) {
    const s = new RawServer(async (k) => {
      for (let req = await k.request(); req !== null; req = await k.request()) {
        for (let i = 0; i < bytes.length; i += step) {
          await k.send(bytes.subarray(i, i + step));
          await k.readTurn();
        }
      }
    });
    const { c } = client();
    await with_(s, c, async () => {
      for (let i = 0; i < 2; i++) {
        const r = await post(c, s.url);
        assert.equal(await text(r), "hello world, ünï", `split every ${step} bytes`);
      }
      assert.equal(s.accepted, 1, "the connection is reused after the trailers");
    });
  }
});

Deno.test("http1: a head that arrives a byte at a time, after a 100 Continue, parses", async () => {
  const wire = enc.encode(
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nx-a: 1\r\nX-Mixed-Case:  v  \r\n" +
      "content-length: 2\r\n\r\nok",
  );
  const s = new RawServer(async (k) => {
    await k.request();
    for (let i = 0; i < wire.length; i++) await k.send(wire.subarray(i, i + 1));
  });
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    assert.equal(r.status, 201);
    assert.deepEqual(r.headers, [["x-a", "1"], ["x-mixed-case", "v"], ["content-length", "2"]]);
    assert.equal(await text(r), "ok");
  });
});

Deno.test("http1: 204 and 304 have no body and keep the connection", async () => {
  let n = 0;
  const s = serve(() => n++ === 0 ? "HTTP/1.1 204 No Content\r\n\r\n" : sized("after"));
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    assert.equal(r.status, 204);
    assert.equal(r.body.whole?.length, 0);
    assert.equal(await text(await post(c, s.url)), "after");
    assert.equal(s.accepted, 1);
  });
});

Deno.test("http1: a worker that closed an idle connection is seen at once; the next request opens a fresh one", async () => {
  const dropped = Promise.withResolvers<void>();
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send(sized("first"));
    if (k.index === 0) {
      // Closes its side; the client's idle read sees the end at once, and the client closes
      // its side as it drops the connection from the pool, which ends this read.
      await k.conn.closeWrite();
      await k.closedByPeer();
      dropped.resolve();
    }
  });
  const { c, counts } = client();
  await with_(s, c, async () => {
    assert.equal(await text(await post(c, s.url)), "first");
    await dropped.promise;
    assert.equal(c.idleCount, 0, "the closed connection left the pool");
    assert.equal(await text(await post(c, s.url)), "first");
    assert.equal(counts.resends, 0, "nothing was sent on the closed connection");
    assert.equal(s.accepted, 2);
  });
});

Deno.test("http1: a worker closing a reused connection as the request arrives costs one resend, not a failure", async () => {
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send(sized(`conn ${k.index}`));
    // The keep-alive race: the next request arrives as the worker gives up on the connection.
    if (k.index === 0) {
      await k.request();
      return;
    }
    for (let req = await k.request(); req !== null; req = await k.request()) {
      await k.send(sized(`conn ${k.index}`));
    }
  });
  const { c, counts } = client();
  await with_(s, c, async () => {
    assert.equal(await text(await post(c, s.url)), "conn 0");
    assert.equal(await text(await post(c, s.url)), "conn 1");
    assert.equal(counts.resends, 1);
    assert.equal(s.accepted, 2);
  });
});

Deno.test("http1: a fresh connection closed without an answer fails as closed and is not resent", async () => {
  const s = new RawServer(async (k) => {
    await k.request();
  });
  const { c, counts } = client();
  await with_(s, c, async () => {
    await rejectsWith(post(c, s.url), "closed", /without answering/);
    assert.equal(counts.resends, 0);
  });
});

Deno.test("http1: nobody listening fails as connect", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close();
  const { c } = client();
  try {
    await rejectsWith(post(c, `http://127.0.0.1:${port}`), "connect");
  } finally {
    c.close();
  }
});

Deno.test("http1: truncated sized and chunked bodies reject the read", async () => {
  for (
    const wire of [
      "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b",
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nshort",
    ]
  ) {
    const s = new RawServer(async (k) => {
      await k.request();
      await k.send(wire);
    });
    const { c } = client();
    await with_(s, c, async () => {
      const r = await post(c, s.url);
      await rejectsWith(readAll(r.body), "closed", /before the body ended/);
      assert.equal(c.idleCount, 0);
    });
  }
});

Deno.test("http1: oversized, malformed and smuggling heads are protocol errors", async () => {
  const big = `x-big: ${"a".repeat(70_000)}\r\n`;
  const cases: [string, RegExp][] = [
    [`HTTP/1.1 200 OK\r\n${big}content-length: 0\r\n\r\n`, /exceeds 65536 bytes/],
    ["SSH-2.0-OpenSSH_9.2\r\n\r\n", /bad status line/],
    ["HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello", /content-length/],
    ["HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", /content-length/],
    ["HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n", /transfer-encoding/],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", /colon/],
  ];
  for (const [wire, re] of cases) {
    const s = new RawServer(async (k) => {
      await k.request();
      await k.send(wire);
      await k.closedByPeer();
    });
    const { c, counts } = client();
    await with_(s, c, async () => {
      await rejectsWith(post(c, s.url), "protocol", re);
      assert.equal(counts.resends, 0);
    });
  }
});

Deno.test("http1: bad chunk framing is a protocol error on read", async () => {
  for (const body of ["zz\r\nhello\r\n", "5\r\nhelloXX\r\n0\r\n\r\n"]) {
    const s = new RawServer(async (k) => {
      await k.request();
      await k.send(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${body}`);
      await k.closedByPeer();
    });
    const { c } = client();
    await with_(s, c, async () => {
      const r = await post(c, s.url);
      await rejectsWith(readAll(r.body), "protocol", /chunk/);
    });
  }
});

Deno.test("http1: a reset mid-stream rejects the read after the bytes that arrived", async () => {
  const socket = Promise.withResolvers<net.Socket>();
  const server = net.createServer((sock) => {
    sock.once("data", () => {
      sock.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n8\r\ndata: 1\n\r\n");
      socket.resolve(sock);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const { c } = client();
  try {
    const r = await post(c, `http://127.0.0.1:${port}`);
    assert.equal(dec.decode((await r.body.read())!), "data: 1\n");
    (await socket.promise).resetAndDestroy(); // once the client has read what was sent
    await rejectsWith(r.body.read(), "closed", /broke off|reset/i);
  } finally {
    c.close();
    await new Promise((r) => server.close(r));
  }
});

Deno.test("http1: head and body-idle timeouts close the connection", async () => {
  const received = new Waiters();
  let requests = 0;
  const s = new RawServer(async (k) => {
    const req = await k.request();
    requests++;
    received.poke();
    if (req?.includes("stall-body")) {
      await k.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc");
    }
    await k.closedByPeer();
  });
  const clock = new FakeClock();
  const { c } = client({ headTimeoutMs: 50, bodyIdleTimeoutMs: 50, clock });
  await with_(s, c, async () => {
    const head = post(c, s.url, "stall-head");
    await received.wait(() => requests === 1, "the first request at the worker");
    clock.advance(50);
    await rejectsWith(head, "timeout", /response head/);
    const r = await post(c, s.url, "stall-body");
    assert.equal(dec.decode((await r.body.read())!), "abc");
    clock.advance(200); // nobody reads: the body's clock waits for the caller, not the worker
    const rest = r.body.read();
    clock.advance(50);
    await rejectsWith(rest, "timeout", /more body bytes/);
  });
});

Deno.test("http1: a request's own idle timeout applies to it; an excused miss starts the wait over", async () => {
  const received = new Waiters();
  let requests = 0;
  const s = new RawServer(async (k) => {
    await k.request();
    requests++;
    received.poke();
    await k.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
    await k.closedByPeer();
  });
  const clock = new FakeClock();
  const { c } = client({ clock });
  let excuses = 1;
  const asked: string[] = [];
  const excused = (phase: "head" | "body") => {
    asked.push(phase);
    return excuses-- > 0;
  };
  await with_(s, c, async () => {
    const cancel = new Cancel();
    const r = await c.send({
      base: s.url,
      path: "/",
      method: "POST",
      headers: [],
      body: new TextEncoder().encode("x"),
      cancel,
      idleTimeoutMs: 100,
      excused,
    });
    const first = r.body.read();
    clock.advance(100); // excused once: waits another 100 ms
    clock.advance(99);
    assert.deepEqual(asked, ["body"]);
    clock.advance(1);
    await rejectsWith(first, "timeout", /more body bytes from the worker within 100 ms/);
    assert.deepEqual(asked, ["body", "body"]);
  });
});

Deno.test("http1: a request's own head timeout applies to it alone, with none on the client", async () => {
  const received = new Waiters();
  let requests = 0;
  const s = new RawServer(async (k) => {
    const req = await k.request();
    requests++;
    received.poke();
    if (req?.includes("patient")) {
      // Answered after the other request's limit: its own has none.
      await received.wait(() => requests === 2, "both requests at the worker");
      await k.send(sized("late but asked for none"));
    }
    await k.closedByPeer();
  });
  const clock = new FakeClock();
  const { c } = client({ clock }); // the client itself has no head timeout
  await with_(s, c, async () => {
    const limited = c.send({
      base: s.url,
      path: "/v1/completions",
      method: "POST",
      headers: [["content-type", "text/plain"]],
      body: enc.encode("limited"),
      cancel: new Cancel(),
      headTimeoutMs: 40,
    });
    await received.wait(() => requests === 1, "the limited request at the worker");
    const patient = post(c, s.url, "patient");
    await received.wait(() => requests === 2, "the patient request at the worker");
    clock.advance(39);
    clock.advance(1);
    await rejectsWith(limited, "timeout", /response head from the worker within 40 ms/);
    clock.advance(1000);
    assert.equal(await text(await patient), "late but asked for none");
  });
});

Deno.test("http1: a head that arrives before the head timeout is not cut", async () => {
  const received = Promise.withResolvers<void>();
  const answer = Promise.withResolvers<void>();
  const s = new RawServer(async (k) => {
    await k.request();
    received.resolve();
    await answer.promise;
    await k.send(sized("late but in time"));
    await k.closedByPeer();
  });
  const clock = new FakeClock();
  const { c } = client({ headTimeoutMs: 50, clock });
  await with_(s, c, async () => {
    const p = post(c, s.url);
    await received.promise;
    clock.advance(49); // the sweeps at 12.5, 25 and 37.5 ms leave it
    answer.resolve();
    assert.equal(await text(await p), "late but in time");
  });
});

Deno.test("http1: cancelling a request waiting for its head closes the connection; the worker sees it", async () => {
  const received = Promise.withResolvers<void>();
  const gone = Promise.withResolvers<void>();
  const s = new RawServer(async (k) => {
    await k.request();
    received.resolve();
    await k.closedByPeer();
    gone.resolve();
  });
  const { c } = client();
  await with_(s, c, async () => {
    const cancel = new Cancel();
    const p = post(c, s.url, "x", cancel);
    await received.promise; // the request is at the worker: the client waits for the head
    cancel.cancel(new Error("client gone"));
    await rejectsWith(p, "aborted");
    await gone.promise;
  });
});

Deno.test("http1: cancelling a body mid-stream closes the connection; it is never reused", async () => {
  const gone = Promise.withResolvers<void>();
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\none\r\n");
    await k.closedByPeer();
    gone.resolve();
  });
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    assert.equal(dec.decode((await r.body.read())!), "one");
    r.body.cancel();
    await gone.promise;
    assert.equal(c.idleCount, 0);
    assert.equal(await r.body.read(), null, "a cancelled body reads as ended");
  });
});

Deno.test("http1: chunks already queued come out of one read", async () => {
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send(
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" +
        "6\r\nev 1\n\n\r\n6\r\nev 2\n\n\r\n6\r\nev 3\n\n\r\n0\r\n\r\n",
    );
    await k.closedByPeer();
  });
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    let reads = 0;
    let all = "";
    for (let b = await r.body.read(); b !== null; b = await r.body.read()) {
      reads++;
      all += dec.decode(b);
    }
    assert.equal(all, "ev 1\n\nev 2\n\nev 3\n\n");
    assert.equal(reads, 1, "three queued events, one read");
  });
});

Deno.test("http1: idle connections past the idle timeout are not reused", async () => {
  const clock = new FakeClock();
  const s = serve(() => sized("ok"));
  const { c } = client({ idleTimeoutMs: 1000, clock });
  await with_(s, c, async () => {
    await text(await post(c, s.url));
    clock.advance(999);
    await text(await post(c, s.url));
    assert.equal(s.accepted, 1);
    clock.advance(1001);
    await text(await post(c, s.url));
    assert.equal(s.accepted, 2, "the connection idle for 1 s was closed, not reused");
  });
});

Deno.test("http1: the idle sweep closes idle connections with no request coming; close() stops it", async () => {
  const clock = new FakeClock();
  const s = serve(() => sized("ok"));
  const { c } = client({ idleTimeoutMs: 1000, clock });
  await with_(s, c, async () => {
    await text(await post(c, s.url));
    assert.equal(c.idleCount, 1);
    assert.equal(clock.pending, 1, "the idle sweep is armed");
    clock.advance(999);
    assert.equal(c.idleCount, 1);
    clock.advance(1);
    assert.equal(c.idleCount, 0, "closed by the sweep");
    assert.equal(clock.pending, 0, "nothing idle: no sweep armed");
    await text(await post(c, s.url));
    assert.equal(s.accepted, 2);
    c.close();
    assert.equal(clock.pending, 0);
  });
});

Deno.test("http1: header bytes pass through as Latin-1; bad names, statuses and values are protocol errors", async () => {
  const utf8 = enc.encode("café ’");
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send(enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-note: "));
    await k.send(utf8);
    await k.send("\r\n\r\nok");
  });
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    const note = r.headers.find(([k]) => k === "x-note")![1];
    assert.deepEqual([...note].map((ch) => ch.charCodeAt(0)), [...utf8], "one char per byte");
    assert.equal(new Response(null, { headers: [["x-note", note]] }).headers.get("x-note"), note);
  });
  for (
    const [wire, re] of [
      ["HTTP/1.1 600 Odd\r\ncontent-length: 0\r\n\r\n", /bad status line/],
      ["HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n", /bad status line/],
      ["HTTP/1.1 200 OK\r\nbad name: x\r\ncontent-length: 0\r\n\r\n", /bad header name/],
      ["HTTP/1.1 200 OK\r\nx-a: 1\x002\r\ncontent-length: 0\r\n\r\n", /bad value/],
    ] as const
  ) {
    const s2 = new RawServer(async (k) => {
      await k.request();
      await k.send(wire);
      await k.closedByPeer();
    });
    const { c: c2 } = client();
    await with_(s2, c2, () => rejectsWith(post(c2, s2.url), "protocol", re));
  }
});

Deno.test("http1: an interim response, then the final head in a later packet after the buffer moved, parses", async () => {
  const s = new RawServer(async (k) => {
    await k.request();
    await k.send(`HTTP/1.1 103 Early Hints\r\nlink: <${"/a".repeat(120)}>\r\n\r\n`);
    await k.readTurn(20);
    // A final head shorter than the interim one: found only if the scan restarts where the
    // buffer's bytes now are.
    await k.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    await k.closedByPeer();
  });
  const { c } = client({ headTimeoutMs: 2000 }); // a missed head fails, not hangs
  await with_(s, c, async () => {
    const r = await post(c, s.url);
    assert.equal(r.status, 200);
    assert.equal(await text(r), "ok");
  });
});

Deno.test("http1: a worker that answers early and closes before taking the whole body is heard", async () => {
  const s = new RawServer(async (k) => {
    const buf = new Uint8Array(1024);
    await k.conn.read(buf); // the head and the start of the body only
    await k.send(
      "HTTP/1.1 413 Payload Too Large\r\nconnection: close\r\ncontent-length: 9\r\n\r\ntoo large",
    );
  });
  const { c } = client();
  await with_(s, c, async () => {
    const r = await post(c, s.url, "x".repeat(32 * 1024 * 1024));
    assert.equal(r.status, 413);
    assert.equal(await text(r), "too large");
  });
});

Deno.test("http1: every connection header counts, repeated equal lengths pass, length with chunked is not reused", async () => {
  let n = 0;
  const s = serve(() => {
    n++;
    if (n === 1) return sized("a", "connection: keep-alive\r\nconnection: Close\r\n");
    if (n === 2) return "HTTP/1.1 200 OK\r\ncontent-length: 1, 1\r\n\r\nb";
    return "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n";
  });
  const { c } = client();
  await with_(s, c, async () => {
    assert.equal(await text(await post(c, s.url)), "a");
    assert.equal(s.accepted, 1);
    assert.equal(await text(await post(c, s.url)), "b");
    assert.equal(s.accepted, 2, "the first connection was closed as told");
    assert.equal(await text(await post(c, s.url)), "c");
    assert.equal(c.idleCount, 0, "an ambiguous frame's connection is not reused");
  });
});

Deno.test("http1: a doomed request is given up on at the next check, before its limit", async () => {
  const received = new Waiters();
  let requests = 0;
  const s = new RawServer(async (k) => {
    await k.request();
    requests++;
    received.poke();
    await k.closedByPeer();
  });
  const clock = new FakeClock();
  const { c } = client({ clock });
  let doomed = false;
  await with_(s, c, async () => {
    const head = c.send({
      base: s.url,
      path: "/",
      method: "POST",
      headers: [],
      body: new TextEncoder().encode("x"),
      cancel: new Cancel(),
      headTimeoutMs: 30_000,
      doomed: () => doomed,
    });
    await received.wait(() => requests === 1, "the request at the worker");
    clock.advance(1000);
    doomed = true;
    clock.advance(1000);
    await rejectsWith(head, "timeout", /stalled/);
  });
});
