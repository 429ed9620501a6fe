/**
 * Which headers cross the gateway: client → worker (hop-by-hop, length and encoding dropped, the
 * gateway's request id, the worker's own key) and worker → client (the same drops but a worker's
 * `content-encoding`, which stays with its bytes; the routing headers, SSE headers forced on
 * streams, repeated `set-cookie` kept).
 */

import assert from "node:assert/strict";
import {
  clientHeaders,
  type HeaderList,
  notAnEventStream,
  upstreamHeaders,
} from "../../../lib/proxy/http/headers.ts";

/** Worker response headers as the upstream client gives them: lower-case pairs. */
function pairs(init: HeadersInit = {}): HeaderList {
  return [...new Headers(init)];
}

/** All values of `name` in `h`, in order. */
function all(h: HeaderList, name: string): string[] {
  return h.filter(([k]) => k === name).map(([, v]) => v);
}

/** The one value of `name`; fails when it appears more than once. */
function one(h: HeaderList, name: string): string | undefined {
  const v = all(h, name);
  assert.ok(v.length <= 1, `${name} appears ${v.length} times: ${JSON.stringify(v)}`);
  return v[0];
}

Deno.test("upstreamHeaders: hop-by-hop, host, length and encoding headers never reach the worker", () => {
  const client = new Headers({
    host: "gateway.example",
    "content-length": "42",
    connection: "keep-alive",
    "keep-alive": "timeout=5",
    "transfer-encoding": "chunked",
    te: "trailers",
    trailer: "x-foo",
    upgrade: "websocket",
    expect: "100-continue",
    "accept-encoding": "gzip, br",
    "proxy-authorization": "Basic xyz",
    "proxy-connection": "keep-alive",
    "content-type": "application/json",
  });
  const h = upstreamHeaders(client, "rid-1", null);
  const names = h.map(([k]) => k).sort();
  assert.deepEqual(names, ["content-type", "x-request-id"]);
});

Deno.test("upstreamHeaders: x-request-id is the gateway's, replacing the client's", () => {
  const h = upstreamHeaders(new Headers({ "x-request-id": "client-id" }), "gw-id", null);
  assert.equal(one(h, "x-request-id"), "gw-id");
});

Deno.test("upstreamHeaders: the worker's key replaces the client's Authorization", () => {
  const client = new Headers({ authorization: "Bearer client-secret" });
  const h = upstreamHeaders(client, "r", "worker-key");
  assert.equal(one(h, "authorization"), "Bearer worker-key");
  assert.ok(!h.some(([, v]) => v.includes("client-secret")), "client bearer is not forwarded");
});

Deno.test("upstreamHeaders: the client's bearer passes when the worker has no key", () => {
  const h = upstreamHeaders(new Headers({ authorization: "Bearer client-secret" }), "r", null);
  assert.equal(one(h, "authorization"), "Bearer client-secret");
  assert.equal(one(upstreamHeaders(new Headers(), "r", null), "authorization"), undefined);
  assert.equal(one(upstreamHeaders(new Headers(), "r", "k"), "authorization"), "Bearer k");
});

Deno.test("upstreamHeaders: content-type defaults to JSON, and a client one is kept", () => {
  assert.equal(one(upstreamHeaders(new Headers(), "r", null), "content-type"), "application/json");
  const h = upstreamHeaders(
    new Headers({ "content-type": "text/plain; charset=utf-8" }),
    "r",
    null,
  );
  assert.equal(one(h, "content-type"), "text/plain; charset=utf-8");
});

Deno.test("upstreamHeaders: unknown and custom headers pass unchanged", () => {
  const client = new Headers({
    "x-custom-thing": "abc",
    "user-agent": "openai-python/1.0",
    accept: "text/event-stream",
    "x-smg-routing-key": "user-7",
  });
  const h = upstreamHeaders(client, "r", null);
  assert.equal(one(h, "x-custom-thing"), "abc");
  assert.equal(one(h, "user-agent"), "openai-python/1.0");
  assert.equal(one(h, "accept"), "text/event-stream");
  assert.equal(one(h, "x-smg-routing-key"), "user-7");
});

Deno.test("upstreamHeaders: the result is accepted by fetch's Headers", () => {
  const h = new Headers(upstreamHeaders(new Headers({ a: "1" }), "r", "k"));
  assert.equal(h.get("x-request-id"), "r");
  assert.equal(h.get("authorization"), "Bearer k");
  assert.equal(h.get("a"), "1");
});

Deno.test("clientHeaders: length, hop-by-hop, date and server headers are dropped; encoding passes with its bytes", () => {
  const worker = pairs({
    "content-length": "10",
    "content-encoding": "gzip",
    "transfer-encoding": "chunked",
    connection: "close",
    "keep-alive": "timeout=5",
    trailer: "x",
    upgrade: "h2c",
    date: "Mon, 01 Jan 2024 00:00:00 GMT",
    server: "uvicorn",
    "content-type": "application/json",
  });
  const h = clientHeaders(worker, "rid", "wid", false);
  const names = h.map(([k]) => k).sort();
  assert.deepEqual(names, [
    "content-encoding",
    "content-type",
    "x-request-id",
    "x-smg-routed-worker-id",
  ]);
  assert.equal(one(h, "content-type"), "application/json");
});

Deno.test("clientHeaders: x-request-id is the gateway's and the routed worker id is added", () => {
  const worker = pairs({ "x-request-id": "worker-made-up", "x-worker": "w" });
  const h = clientHeaders(worker, "gw-rid", "worker-uuid", false);
  assert.equal(one(h, "x-request-id"), "gw-rid");
  assert.equal(one(h, "x-smg-routed-worker-id"), "worker-uuid");
  assert.equal(one(h, "x-worker"), "w");
});

Deno.test("clientHeaders: streams get text/event-stream and no-cache whatever the worker said", () => {
  const worker = pairs({
    "content-type": "application/json",
    "cache-control": "max-age=600",
  });
  const h = clientHeaders(worker, "r", "w", true);
  assert.equal(one(h, "content-type"), "text/event-stream");
  assert.equal(one(h, "cache-control"), "no-cache");
  const bare = clientHeaders(pairs(), "r", "w", true);
  assert.equal(one(bare, "content-type"), "text/event-stream");
  assert.equal(one(bare, "cache-control"), "no-cache");
});

Deno.test("clientHeaders: non-streams keep the worker's content-type and cache-control", () => {
  const worker = pairs({ "content-type": "application/json", "cache-control": "private" });
  const h = clientHeaders(worker, "r", "w", false);
  assert.equal(one(h, "content-type"), "application/json");
  assert.equal(one(h, "cache-control"), "private");
});

Deno.test("clientHeaders: several set-cookie values all reach the client", () => {
  const worker: HeaderList = [["set-cookie", "a=1; Path=/"], ["set-cookie", "b=2; Path=/"]];
  const h = clientHeaders(worker, "r", "w", false);
  assert.deepEqual(all(h, "set-cookie"), ["a=1; Path=/", "b=2; Path=/"]);
  const res = new Response(null, { headers: h });
  assert.deepEqual(res.headers.getSetCookie(), ["a=1; Path=/", "b=2; Path=/"]);
});

Deno.test("notAnEventStream: only an uncompressed text/event-stream answer is relayed as a stream", () => {
  const ok: HeaderList[] = [
    [["content-type", "text/event-stream"]],
    [["content-type", "text/event-stream; charset=utf-8"], ["content-encoding", "identity"]],
    [["content-type", "Text/Event-Stream"]],
  ];
  for (const h of ok) assert.equal(notAnEventStream(h), null, JSON.stringify(h));
  const wrong: [HeaderList, RegExp][] = [
    [[["content-type", "application/json"]], /content-type application\/json/],
    [[], /no content-type/],
    [
      [["content-type", "text/event-stream"], ["content-encoding", "gzip"]],
      /content-encoding gzip/,
    ],
  ];
  for (const [h, re] of wrong) assert.match(notAnEventStream(h) ?? "", re, JSON.stringify(h));
});
