/**
 * The inference proxy as a handler with a fake fetch (behind `FetchUpstream`): no server, no sockets. Covers routing to
 * eligible workers, retries that never re-pick a failed worker, pass-through of worker errors,
 * the error envelope, timeouts, breaker bookkeeping and in-flight accounting.
 */

import assert from "node:assert/strict";
import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { createLogger, silentLogger } from "../../lib/core/log.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { Admission } from "../../lib/proxy/admission.ts";
import { InferenceProxy } from "../../lib/proxy/proxy.ts";
import { RequestInbound, toResponse } from "../../lib/server/inbound.ts";
import { type FetchFn, FetchUpstream } from "../../lib/upstream/fetch_upstream.ts";
import { testConfig } from "../../support/gateway.ts";
import type { Overrides } from "../../support/gateway.ts";
import { workerSetup } from "../support/workers.ts";

type Reply = Response | Error | ((init: RequestInit) => Promise<Response>);

/** A proxy over fake workers whose replies are scripted per URL. */
function setup(replies: Record<string, Reply[]>, o: Overrides = {}, log = silentLogger) {
  const config = testConfig(o);
  const clock = new FakeClock(1000);
  const { registry, manager } = workerSetup(clock, {
    health: config.health,
    circuitBreaker: config.circuitBreaker,
  });
  const calls: string[] = [];
  const fetchFn: FetchFn = (url, init) => {
    const base = Object.keys(replies).find((u) => url.startsWith(u))!;
    calls.push(base);
    const queue = replies[base];
    const r = queue.length > 1 ? queue.shift()! : queue[0];
    if (r instanceof Error) return Promise.reject(r);
    if (typeof r === "function") return r(init);
    return Promise.resolve(r.clone());
  };
  const workers = Object.keys(replies).map((url) => {
    const w = manager.add({ url, models: ["m"] });
    w.setStatus("ready");
    return w;
  });
  const metrics = new Metrics();
  const policy = new RoundRobinPolicy();
  const proxy = new InferenceProxy({
    config,
    registry,
    policies: { forModel: () => policy },
    metrics,
    log,
    clock,
    random: seededRandom(1),
    upstream: new FetchUpstream(fetchFn),
    admission: new Admission(config.admission, metrics, clock),
  });
  const send = async (body: unknown, path: "chat" | "generate" = "chat") => {
    const { promise, resolve } = Promise.withResolvers<void>();
    const req = new Request("http://gw/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const res = toResponse(
      await proxy.handle(new RequestInbound(req), path, { requestId: "req-1", completed: promise }),
    );
    const text = await res.text();
    resolve();
    await promise;
    proxy.close(); // the deadline timer outlives a request by one tick otherwise
    return { res, text, json: () => JSON.parse(text) };
  };
  return { send, calls, workers, clock, metrics, registry };
}

const chat = { model: "m", messages: [{ role: "user", content: "hi" }] };
const ok = (worker: string) => Response.json({ from: worker });
const status = (s: number) =>
  new Response(JSON.stringify({ error: { message: `worker says ${s}` } }), { status: s });

Deno.test("proxy: forwards to a ready worker and names it in the response", async () => {
  const t = setup({ "http://a": [ok("a")] });
  const r = await t.send(chat);
  assert.equal(r.res.status, 200);
  assert.deepEqual(r.json(), { from: "a" });
  assert.equal(r.res.headers.get("x-smg-routed-worker-id"), t.workers[0].id);
  assert.equal(r.res.headers.get("x-request-id"), "req-1");
  assert.equal(t.workers[0].inFlight, 0, "in-flight released after the response completed");
});

Deno.test("proxy: a 500 is retried on another worker, never the one that failed", async () => {
  const t = setup({ "http://a": [status(500)], "http://b": [ok("b")], "http://c": [ok("c")] });
  for (let i = 0; i < 6; i++) {
    const before = t.calls.length;
    const r = await t.send(chat);
    assert.equal(r.res.status, 200);
    const tried = t.calls.slice(before);
    assert.equal(new Set(tried).size, tried.length, `no worker twice in one request: ${tried}`);
  }
});

Deno.test("proxy: when every worker fails, the last worker's own error passes through", async () => {
  const t = setup({ "http://a": [status(503)], "http://b": [status(503)] });
  const r = await t.send(chat);
  assert.equal(r.res.status, 503);
  assert.deepEqual(r.json(), { error: { message: "worker says 503" } });
  assert.deepEqual([...t.calls].sort(), ["http://a", "http://b"], "each worker tried once");
});

Deno.test("proxy: connect errors become 502 call_upstream_failed after trying every worker", async () => {
  const t = setup({
    "http://a": [new TypeError("connection refused")],
    "http://b": [new TypeError("reset")],
  });
  const r = await t.send(chat);
  assert.equal(r.res.status, 502);
  assert.equal(r.json().error.code, "call_upstream_failed");
  assert.equal(r.res.headers.get("x-smg-error-code"), "call_upstream_failed");
  assert.equal(t.calls.length, 2);
});

Deno.test("proxy: a 4xx from a worker is returned as is, not retried, and does not trip the breaker", async () => {
  const t = setup({ "http://a": [status(400)], "http://b": [ok("b")] }, {
    circuitBreaker: { failureThreshold: 1 },
  });
  const r = await t.send(chat);
  assert.equal(r.res.status, 400);
  assert.equal(t.calls.length, 1);
  assert.equal(t.workers[0].breaker.state(t.clock.now()), "closed");
});

Deno.test("proxy: 429 is retried elsewhere but never opens the breaker", async () => {
  const t = setup({ "http://a": [status(429)], "http://b": [ok("b")] }, {
    circuitBreaker: { failureThreshold: 1 },
  });
  for (let i = 0; i < 3; i++) assert.equal((await t.send(chat)).res.status, 200);
  assert.equal(t.workers[0].breaker.state(t.clock.now()), "closed");
});

Deno.test("proxy: a breaker opened by 5xx takes the worker out until its timeout", async () => {
  const t = setup(
    { "http://a": [status(500)], "http://b": [ok("b")] },
    { circuitBreaker: { failureThreshold: 2, timeoutSecs: 30 } },
  );
  // Round robin alternates a, b: requests 1 and 3 reach a and fail there.
  for (let i = 0; i < 3; i++) assert.equal((await t.send(chat)).res.status, 200);
  assert.equal(t.workers[0].breaker.state(t.clock.now()), "open");
  const before = t.calls.length;
  for (let i = 0; i < 4; i++) await t.send(chat);
  assert.deepEqual(t.calls.slice(before), Array(4).fill("http://b"), "open worker never picked");
  t.clock.advance(30_000);
  assert.equal(t.workers[0].breaker.state(t.clock.now()), "half_open");
});

Deno.test("proxy: --disable-retries makes one attempt", async () => {
  const t = setup({ "http://a": [status(502)], "http://b": [ok("b")] }, {
    retry: { disabled: true },
  });
  const r = await t.send(chat);
  assert.equal(r.res.status, 502);
  assert.equal(t.calls.length, 1);
});

Deno.test("proxy: bad input gets a 400 envelope naming the field, before any worker is called", async () => {
  const t = setup({ "http://a": [ok("a")] });
  const cases: [unknown, string | null][] = [
    ["{not json", null],
    [{ model: 7, messages: [] }, "model"],
    [{ model: "m", messages: [] }, "messages"],
    [{ model: "m", messages: "hi" }, "messages"],
    [{ model: "m", messages: [{ content: "x" }] }, "messages[0].role"],
    [{ model: "m", messages: [{ role: "user", content: "x" }], stream: "yes" }, "stream"],
    [{ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: -1 }, "max_tokens"],
    [[1, 2], null],
  ];
  for (const [body, param] of cases) {
    const r = await t.send(body);
    assert.equal(r.res.status, 400, JSON.stringify(body));
    const e = r.json().error;
    assert.equal(typeof e.message, "string");
    assert.equal(e.param, param, JSON.stringify(body));
  }
  assert.equal(t.calls.length, 0);
});

Deno.test("proxy: unknown model is 404 model_not_found; no ready worker is 503 with Retry-After", async () => {
  const t = setup({ "http://a": [ok("a")] });
  const r = await t.send({ ...chat, model: "nope" });
  assert.equal(r.res.status, 404);
  assert.equal(r.json().error.code, "model_not_found");
  t.workers[0].setStatus("not_ready");
  const r2 = await t.send(chat);
  assert.equal(r2.res.status, 503);
  assert.equal(r2.json().error.code, "no_available_workers");
  assert.ok(r2.res.headers.get("retry-after"));
});

Deno.test("proxy: every worker overloaded sheds with the load-monitor interval as Retry-After", async () => {
  const t = setup({ "http://a": [ok("a")] }, { loadMonitor: { intervalSecs: 7 } });
  t.workers[0].overloaded = true;
  const r = await t.send(chat);
  assert.equal(r.res.status, 503);
  assert.equal(r.res.headers.get("retry-after"), "7");
});

Deno.test("proxy: a worker that never answers gets 504 request_timeout", async () => {
  const sent = Promise.withResolvers<void>();
  const hang: Reply = (init) => {
    sent.resolve();
    return new Promise((_, reject) =>
      init.signal!.addEventListener("abort", () => reject(init.signal!.reason))
    );
  };
  const t = setup({ "http://a": [hang], "http://b": [hang] }, {
    requestTimeoutSecs: 0.05 as number,
  });
  const pending = t.send(chat);
  await sent.promise; // at the worker: its deadline is registered
  t.clock.advance(50); // the deadline's sweep timer runs on the injected clock
  const r = await pending;
  assert.equal(r.res.status, 504);
  assert.equal(r.json().error.code, "request_timeout");
  assert.equal(t.calls.length, 1, "the deadline covers the whole request; no retry after it");
  assert.equal(t.workers[0].inFlight, 0);
});

Deno.test("proxy: a stream that breaks before its first byte is retried on another worker", async () => {
  const broken = () =>
    Promise.resolve(
      new Response(new ReadableStream({ pull: (c) => c.error(new Error("died")) }), {
        headers: { "content-type": "text/event-stream" },
      }),
    );
  const good = () =>
    Promise.resolve(
      new Response('data: {"x":1}\n\ndata: [DONE]\n\n', {
        headers: { "content-type": "text/event-stream" },
      }),
    );
  const t = setup({ "http://a": [broken], "http://b": [good] });
  const r = await t.send({ ...chat, stream: true });
  assert.equal(r.res.status, 200);
  assert.equal(r.res.headers.get("content-type"), "text/event-stream");
  assert.match(r.text, /\[DONE\]/);
  assert.equal(t.calls.length, 2);
});

Deno.test("proxy: a stream answered with a whole JSON body is retried on another worker, nothing relayed", async () => {
  const json = () =>
    Promise.resolve(Response.json({ choices: [{ message: { content: "whole" } }] }));
  const sse = () =>
    Promise.resolve(
      new Response('data: {"x":1}\n\ndata: [DONE]\n\n', {
        headers: { "content-type": "text/event-stream" },
      }),
    );
  const t = setup({ "http://a": [json], "http://b": [sse] });
  const r = await t.send({ ...chat, stream: true });
  assert.equal(r.res.status, 200);
  assert.equal(r.text, 'data: {"x":1}\n\ndata: [DONE]\n\n');
  assert.equal(t.calls.length, 2);
  assert.equal(t.workers[0].breaker.consecutiveFailures, 1, "it counts against the worker");
  const alone = setup({ "http://a": [json] });
  const r2 = await alone.send({ ...chat, stream: true });
  assert.equal(r2.res.status, 502);
  assert.match(r2.text, /answered a stream wrongly: content-type application\/json/);
});

Deno.test("proxy: a worker head too large to relay is retried on another worker", async () => {
  const huge = () => {
    const headers = new Headers({ "content-type": "application/json" });
    for (let i = 0; i < 1000; i++) headers.append(`x-h${i}`, "v");
    return Promise.resolve(new Response('{"ok":"huge"}', { headers }));
  };
  const sane = () => Promise.resolve(Response.json({ ok: "sane" }));
  const t = setup({ "http://a": [huge], "http://b": [sane] });
  const r = await t.send(chat);
  assert.equal(r.res.status, 200);
  assert.equal(r.text, '{"ok":"sane"}');
  assert.equal(t.calls.length, 2);
  const alone = setup({ "http://a": [huge] });
  const r2 = await alone.send(chat);
  assert.equal(r2.res.status, 502);
  assert.match(r2.text, /1001 headers of \d+ bytes, over the 8192 relayed/);
  assert.ok([...r2.res.headers.keys()].length < 20, "none of the worker's headers relayed");
});

Deno.test("proxy: a stream that breaks mid-way, continuation off, ends with an SSE error event", async () => {
  const enc = new TextEncoder();
  const dying = () => {
    let n = 0;
    return Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          pull(c) {
            if (n++ < 2) c.enqueue(enc.encode(`data: {"n":${n}}\n\n`));
            else c.error(new Error("connection reset"));
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      ),
    );
  };
  const t = setup({ "http://a": [dying], "http://b": [dying] }, { streamMigrationLimit: 0 });
  const r = await t.send({ ...chat, stream: true });
  assert.equal(r.res.status, 200);
  assert.match(r.text, /^data: \{"n":1\}\n\ndata: \{"n":2\}\n\nevent: error\ndata: \{"error":/);
  assert.equal(t.calls.length, 1, "no retry once bytes reached the client");
  assert.equal(t.workers[0].breaker.consecutiveFailures, 1, "the break counts against the worker");
});

// A whole (non-streamed) answer reaches the client only once complete: a worker that breaks or
// stalls mid-body has sent the client nothing yet (found by bench:faults, worker resets and
// hangs mid-stream: whole answers reached clients as a 200 cut short).
const halfAnswer = (after: "break" | "stall") => (init: RequestInit): Promise<Response> =>
  Promise.resolve(
    new Response(
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode('{"from": "a", "choi'));
          if (after === "break") c.error(new Error("connection reset"));
          else init.signal!.addEventListener("abort", () => c.error(init.signal!.reason));
        },
      }),
      { headers: { "content-type": "application/json" } },
    ),
  );

Deno.test("proxy: a whole answer that breaks before its end is retried on another worker", async () => {
  const t = setup({ "http://a": [halfAnswer("break")], "http://b": [ok("b")] });
  const r = await t.send(chat);
  assert.equal(r.res.status, 200);
  assert.deepEqual(r.json(), { from: "b" });
  assert.deepEqual(t.calls, ["http://a", "http://b"]);
  assert.equal(t.workers[0].breaker.consecutiveFailures, 1, "the break counts against the worker");
  assert.equal(t.workers[0].inFlight, 0);
});

Deno.test("proxy: a whole answer that stalls past the deadline is a 504, not a 200 cut short", async () => {
  const sent = Promise.withResolvers<void>();
  const stall = halfAnswer("stall");
  const t = setup({
    "http://a": [(init) => {
      sent.resolve();
      return stall(init);
    }],
  }, { requestTimeoutSecs: 0.05 as number });
  const pending = t.send(chat);
  await sent.promise;
  t.clock.advance(50);
  const r = await pending;
  assert.equal(r.res.status, 504);
  assert.equal(r.json().error.code, "request_timeout");
  assert.equal(t.workers[0].inFlight, 0);
});

Deno.test("proxy: the worker's key replaces the client's bearer; the body is forwarded byte for byte", async () => {
  let seen: RequestInit | null = null;
  const t = setup({
    "http://a": [(init) => {
      seen = init;
      return Promise.resolve(ok("a"));
    }],
  });
  const raw =
    '{"model":"m","messages":[{"role":"user","content":"hi"}],"unknown_field":{"kept":true}}';
  await t.send(raw);
  const init = seen as unknown as RequestInit;
  assert.equal(new TextDecoder().decode(init.body as Uint8Array), raw);
  assert.equal(new Headers(init.headers).get("x-request-id"), "req-1");
});

Deno.test("proxy: log lines about a request carry its request id", async () => {
  const lines: string[] = [];
  const log = createLogger({ level: "info", json: true, sink: (l) => lines.push(l) });
  const t = setup({ "http://a": [status(500)], "http://b": [ok("b")] }, {}, log);
  await t.send(chat);
  const retry = lines.map((l) => JSON.parse(l)).find((l) => l.msg.includes("retrying"));
  assert.ok(retry, lines.join("\n"));
  assert.equal(retry.request_id, "req-1");
  assert.equal(retry.worker, "http://a");
  assert.equal(retry.level, "warn");
});

Deno.test("proxy: at debug level every request leaves one line with its id, status and worker", async () => {
  const lines: string[] = [];
  const log = createLogger({ level: "debug", json: true, sink: (l) => lines.push(l) });
  const t = setup({ "http://a": [ok("a")] }, {}, log);
  await t.send(chat);
  await t.send({ model: "m", messages: [] });
  const parsed = lines.map((l) => JSON.parse(l));
  const routed = parsed.find((l) => l.msg === "request routed");
  assert.equal(routed.request_id, "req-1");
  assert.equal(routed.status, 200);
  assert.equal(routed.worker, t.workers[0].id);
  const refused = parsed.find((l) => l.msg === "request refused");
  assert.equal(refused.status, 400);
  assert.equal(refused.code, "invalid_request");
});

Deno.test("proxy: a gRPC worker this gateway cannot speak to (no tokenizer) costs a retry and counts against it", async () => {
  const t = setup({ "grpc://127.0.0.1:50051": [ok("never")], "http://w2": [ok("w2")] });
  const grpcWorker = t.registry.byUrl("grpc://127.0.0.1:50051")!;
  for (let i = 0; i < 2; i++) {
    const r = await t.send(chat);
    assert.equal(r.res.status, 200);
    assert.deepEqual(r.json(), { from: "w2" });
  }
  assert.ok(!t.calls.includes("grpc://127.0.0.1:50051"), "nothing was sent to it over HTTP");
  assert.ok(grpcWorker.breaker.consecutiveFailures >= 1, "its breaker counts the failures");
  assert.equal(grpcWorker.inFlight, 0);
});
