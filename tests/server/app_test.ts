/**
 * The whole gateway over real loopback HTTP: the official `openai` client, sglang's
 * `/generate`, streams, worker failures of every kind, client disconnects, concurrency, the
 * worker API, probes, metrics and the API key.
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { FakeClock } from "../../lib/core/clock.ts";
import { defaultConfig } from "../../lib/config/flags.ts";
import { FakeWorker, GarbageServer } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";

const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };

function post(g: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(g.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** Runs `fn` with a gateway in front of fresh fake workers, closing everything after. */
async function withFleet(
  workers: FakeWorker[],
  fn: (g: TestGateway) => Promise<void>,
  o: Parameters<typeof startGateway>[1] = {},
  extra: Parameters<typeof startGateway>[2] = {},
) {
  const g = await startGateway(workers.map((w) => w.url), o, extra);
  try {
    await fn(g);
  } finally {
    await g.close();
    await Promise.all(workers.map((w) => w.close()));
  }
}

/** What serves the main port in the tests that run on both. */
const SERVERS = ["own", "deno"] as const;

for (const httpServer of SERVERS) {
  Deno.test(`app (${httpServer}): the official openai client gets chat and completion answers, streaming and not`, async () => {
    await withFleet([new FakeWorker(), new FakeWorker()], async (g) => {
      const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const c = await client.chat.completions.create({
        model: "test-model",
        messages: [{ role: "user", content: "hi" }],
      });
      assert.match(c.choices[0].message.content ?? "", /hello from/);

      const stream = await client.chat.completions.create({
        model: "test-model",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      assert.equal(text, "t0 t1 t2 ");

      const p = await client.completions.create({ model: "test-model", prompt: "hi" });
      assert.match(p.choices[0].text, /hello from/);
      const ps = await client.completions.create({
        model: "test-model",
        prompt: "hi",
        stream: true,
      });
      let ptext = "";
      for await (const chunk of ps) ptext += chunk.choices[0]?.text ?? "";
      assert.equal(ptext, "t0 t1 t2 ");
    }, { httpServer });
  });
}

Deno.test("app: sglang /generate works streaming and not, with and without a model", async () => {
  await withFleet([new FakeWorker()], async (g) => {
    const r = await post(g, "/generate", { text: "hi", sampling_params: { max_new_tokens: 4 } });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).text, "hello");
    const s = await post(g, "/generate", { text: "hi", stream: true, model: "test-model" });
    assert.equal(s.headers.get("content-type"), "text/event-stream");
    const body = await s.text();
    assert.match(body, /"text":"t0"/);
    assert.match(body, /data: \[DONE\]/);
  });
});

Deno.test("app: round_robin spreads requests evenly and every response names its worker", async () => {
  const ws = [new FakeWorker(), new FakeWorker(), new FakeWorker()];
  await withFleet(ws, async (g) => {
    const ids = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      const r = await post(g, "/v1/chat/completions", chat);
      await r.body?.cancel();
      const id = r.headers.get("x-smg-routed-worker-id")!;
      ids.set(id, (ids.get(id) ?? 0) + 1);
      assert.ok(r.headers.get("x-request-id")?.startsWith("chatcmpl-"));
    }
    assert.deepEqual([...ids.values()], [10, 10, 10]);
    assert.deepEqual(ws.map((w) => w.seen.requests), [10, 10, 10]);
  });
});

Deno.test("app: a client request id is echoed and forwarded to the worker", async () => {
  const w = new FakeWorker();
  await withFleet([w], async (g) => {
    const r = await post(g, "/v1/chat/completions", chat, { "x-request-id": "my-id-1" });
    await r.body?.cancel();
    assert.equal(r.headers.get("x-request-id"), "my-id-1");
    assert.equal(w.seen.lastHeaders?.get("x-request-id"), "my-id-1");
  });
});

Deno.test("app: bad input gets a clear status and body, and nothing reaches a worker", async () => {
  const w = new FakeWorker();
  await withFleet([w], async (g) => {
    const cases: [string, unknown, number, string][] = [
      ["/v1/chat/completions", "{oops", 400, "json_parse_error"],
      ["/v1/chat/completions", { model: "test-model", messages: [] }, 400, "invalid_request"],
      [
        "/v1/chat/completions",
        { model: 1, messages: [{ role: "user", content: "x" }] },
        400,
        "invalid_request",
      ],
      ["/v1/completions", { model: "test-model" }, 400, "invalid_request"],
      ["/generate", { sampling_params: {} }, 400, "invalid_request"],
      ["/v1/chat/completions", { ...chat, model: "other-model" }, 404, "model_not_found"],
    ];
    for (const [path, body, status, code] of cases) {
      const r = await post(g, path, body);
      assert.equal(r.status, status, `${path} ${JSON.stringify(body)}`);
      assert.equal((await r.json()).error.code, code);
      assert.equal(r.headers.get("x-smg-error-code"), code);
    }
    assert.equal(w.seen.requests, 0);
  });
});

Deno.test("app: a body over --max-payload-size is refused with 413", async () => {
  await withFleet([new FakeWorker()], async (g) => {
    const big = { ...chat, messages: [{ role: "user", content: "x".repeat(5000) }] };
    const r = await post(g, "/v1/chat/completions", big);
    assert.equal(r.status, 413);
    assert.equal((await r.json()).error.code, "payload_too_large");
  }, { maxPayloadSize: 4096 });
});

Deno.test("app: a body over --max-payload-size on the worker API is a 413 too, not a 500", async () => {
  await withFleet([new FakeWorker()], async (g) => {
    const r = await post(g, "/workers", { url: "http://127.0.0.1:9", pad: "x".repeat(5000) });
    assert.equal(r.status, 413);
    assert.equal((await r.json()).error.code, "payload_too_large");
    assert.ok(r.headers.get("x-request-id"));
  }, { maxPayloadSize: 4096 });
});

Deno.test("app: with no worker at all, inference is 503 and readiness is 503", async () => {
  await withFleet([], async (g) => {
    const r = await post(g, "/v1/chat/completions", chat);
    assert.equal(r.status, 503);
    assert.equal((await r.json()).error.code, "no_available_workers");
    assert.ok(r.headers.get("retry-after"));
    const ready = await fetch(`${g.url}/readiness`);
    assert.equal(ready.status, 503);
    assert.equal((await ready.json()).reason, "insufficient healthy workers");
  });
});

Deno.test("app: a worker answering garbage costs a retry, not the request", async () => {
  const garbage = new GarbageServer();
  const good = new FakeWorker();
  const g = await startGateway([garbage.url, good.url], { health: { disabled: true } });
  try {
    g.gw.registry.byUrl(garbage.url)!.models = ["test-model"];
    for (let i = 0; i < 4; i++) {
      const r = await post(g, "/v1/chat/completions", chat);
      assert.equal(r.status, 200);
      await r.body?.cancel();
    }
    assert.equal(good.seen.requests, 4);
  } finally {
    await g.close();
    await good.close();
    await garbage.close();
  }
});

Deno.test("app: when every worker answers garbage the client gets 502 call_upstream_failed", async () => {
  const garbage = new GarbageServer();
  const g = await startGateway([garbage.url], { health: { disabled: true } });
  try {
    const r = await post(g, "/generate", { text: "hi" });
    assert.equal(r.status, 502);
    assert.equal((await r.json()).error.code, "call_upstream_failed");
  } finally {
    await g.close();
    await garbage.close();
  }
});

Deno.test("app: all workers down is 503 no_available_workers", async () => {
  const ws = [new FakeWorker(), new FakeWorker()];
  await withFleet(ws, async (g) => {
    for (const w of g.gw.registry.all()) w.setStatus("not_ready");
    const r = await post(g, "/v1/chat/completions", chat);
    assert.equal(r.status, 503);
    assert.equal((await r.json()).error.code, "no_available_workers");
    assert.equal(ws[0].seen.requests + ws[1].seen.requests, 0);
  });
});

Deno.test("app: a hanging worker gets 504 at the request timeout and is told to stop", async () => {
  const w = new FakeWorker({ mode: { kind: "hang" } });
  const clock = new FakeClock();
  await withFleet(
    [w],
    async (g) => {
      const pending = post(g, "/v1/chat/completions", chat);
      await until(() => w.seen.requests > 0, (l) => w.subscribe(l), "the request at the worker");
      clock.advance(999);
      assert.equal(w.seen.aborted, 0, "not before the timeout"); // no sweep expired it
      clock.advance(1);
      const r = await pending;
      assert.equal(r.status, 504);
      assert.equal((await r.json()).error.code, "request_timeout");
      assert.equal(g.gw.registry.all()[0].inFlight, 0);
    },
    { requestTimeoutSecs: 1 },
    { clock },
  );
  assert.equal(w.seen.aborted, 1, "the worker saw its request cancelled");
});

Deno.test("app: a stream whose worker holds its head past --stream-head-timeout-secs is retried on another", async () => {
  const hung = new FakeWorker({ mode: { kind: "hang" } });
  const fine = new FakeWorker();
  const clock = new FakeClock();
  await withFleet(
    [hung, fine],
    async (g) => {
      // Only the hung worker is routable until the stream is there.
      const other = g.gw.registry.all().find((w) => w.url === fine.url)!;
      other.setStatus("not_ready");
      const stream = post(g, "/v1/chat/completions", { ...chat, stream: true });
      await until(
        () => hung.seen.requests > 0,
        (l) => hung.subscribe(l),
        "the stream at the worker",
      );
      other.setStatus("ready");
      clock.advance(999);
      assert.equal(hung.seen.aborted, 0, "not before the head timeout");
      clock.advance(1);
      const r = await stream;
      assert.equal(r.status, 200);
      assert.match(await r.text(), /data: \[DONE\]/);
      assert.equal(fine.seen.requests, 1, "the held stream was retried on the other worker");
      assert.equal(hung.seen.requests, 1);
    },
    { requestTimeoutSecs: 60, streamHeadTimeoutSecs: 1 },
    { clock },
  );
  assert.equal(hung.seen.aborted, 1, "the hung worker saw its request cancelled");
});

Deno.test("app: a stream no worker starts within --stream-head-timeout-secs is a 504, not a 502", async () => {
  const hung = new FakeWorker({ mode: { kind: "hang" } });
  const clock = new FakeClock();
  await withFleet(
    [hung],
    async (g) => {
      const stream = post(g, "/v1/chat/completions", { ...chat, stream: true });
      await until(
        () => hung.seen.requests > 0,
        (l) => hung.subscribe(l),
        "the stream at the worker",
      );
      clock.advance(1000);
      const r = await stream;
      assert.equal(r.status, 504, "a timeout of the worker, as nginx and HAProxy answer one");
      assert.match(await r.text(), /no response head from the worker within 1000 ms/);
      const metrics = await (await fetch(g.metricsUrl)).text();
      assert.match(metrics, /^smg_worker_errors_total\{[^}]*error_type="timeout"\} 1$/m);
      assert.match(
        metrics,
        /^smg_router_upstream_responses_total\{[^}]*status_code="504",error_code="call_upstream_failed"\} 1$/m,
      );
    },
    {
      requestTimeoutSecs: 60,
      streamHeadTimeoutSecs: 1,
      retry: { ...defaultConfig().retry, disabled: true },
    },
    { clock },
  );
  assert.equal(hung.seen.aborted, 1, "the hung worker saw its request cancelled");
});

Deno.test("app: a worker closing mid-stream ends the client's stream with an error event", async () => {
  const w = new FakeWorker({ mode: { kind: "die_mid_stream", afterChunks: 2 } });
  await withFleet([w], async (g) => {
    const r = await post(g, "/v1/chat/completions", { ...chat, stream: true });
    assert.equal(r.status, 200);
    const body = await r.text();
    assert.match(body, /t0.*t1/s);
    assert.match(body, /event: error\ndata: \{"error":\{"message":"worker .* stream broke/);
    assert.equal(g.gw.registry.all()[0].inFlight, 0);
  });
});

Deno.test("app: the openai client sees a mid-stream worker death as an error, not a hang", async () => {
  const w = new FakeWorker({ mode: { kind: "die_mid_stream", afterChunks: 1 } });
  await withFleet([w], async (g) => {
    const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "test-model",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    await assert.rejects(async () => {
      for await (const _ of stream) { /* drain */ }
    });
  });
});

/** Waits until `w` saw its request cancelled and the gateway released it. */
async function assertWorkerCancelled(g: TestGateway, w: FakeWorker): Promise<void> {
  const worker = g.gw.registry.all()[0];
  await until(() => w.seen.aborted > 0, (l) => w.subscribe(l), "the worker to see the cancel");
  await within(worker.idle(), "the gateway to release the worker");
  assert.equal(w.seen.aborted, 1, "worker saw the cancel");
  assert.equal(worker.inFlight, 0, "gateway released the worker");
}

for (const httpServer of SERVERS) {
  Deno.test(`app (${httpServer}): a client leaving before the worker answers cancels the worker's request`, async () => {
    const w = new FakeWorker({ mode: { kind: "hang" } });
    await withFleet([w], async (g) => {
      const ac = new AbortController();
      const r = fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify(chat),
        signal: ac.signal,
      }).catch((e) => e);
      await until(() => w.seen.requests > 0, (l) => w.subscribe(l), "the request at the worker");
      assert.equal(w.seen.requests, 1);
      ac.abort();
      assert.ok((await r) instanceof Error);
      await assertWorkerCancelled(g, w);
    }, { httpServer });
  });

  Deno.test(`app (${httpServer}): a client leaving mid-stream cancels the worker's request`, async () => {
    // One chunk, then nothing: the stream is under way until the client leaves.
    const w = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 1 } });
    await withFleet([w], async (g) => {
      const ac = new AbortController();
      const r = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ ...chat, stream: true }),
        signal: ac.signal,
      });
      const reader = r.body!.getReader();
      await reader.read();
      ac.abort();
      await reader.cancel().catch(() => {});
      await assertWorkerCancelled(g, w);
    }, { httpServer });
  });
}

/** Heap in use after a full collection (needs --v8-flags=--expose-gc, as `deno task test` sets). */
function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, "run with --v8-flags=--expose-gc");
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
}

Deno.test("app: 1,000 concurrent streams all complete, leave nothing in flight, and memory returns", async () => {
  const ws = [new FakeWorker({ chunks: 5 }), new FakeWorker({ chunks: 5 })];
  // At most 1,000 idle client connections: each costs the front a few KB of heap, and an
  // unbounded client pool grows its count from burst to burst, which is not what this measures.
  const client = Deno.createHttpClient({ poolMaxIdlePerHost: 1000 });
  await withFleet(ws, async (g) => {
    const burst = (n: number) =>
      Promise.all(Array.from({ length: n }, async () => {
        const r = await fetch(g.url + "/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...chat, stream: true }),
          client,
        });
        const text = await r.text();
        return r.status === 200 && text.endsWith("data: [DONE]\n\n");
      }));
    // The first bursts grow connection pools (the gateway's idle workers connections, up to 500
    // per worker, live on the JS heap), JIT code and metric children; seen: +1.2 MB in the second
    // burst, +0.3 MB in the third, then +40 KB and +12 KB.
    for (let i = 0; i < 3; i++) assert.equal((await burst(1000)).filter(Boolean).length, 1000);
    const before = heapAfterGc();
    const results = await burst(1000);
    assert.equal(results.filter(Boolean).length, 1000);
    for (const w of g.gw.registry.all()) assert.equal(w.inFlight, 0);
    assert.deepEqual(ws.map((w) => w.seen.requests), [2000, 2000]);
    const grown = heapAfterGc() - before;
    // A leak of even 1 KB per stream would show as ~1 MB; allow noise below that.
    assert.ok(grown < 1_000_000, `heap grew by ${grown} bytes over 1,000 streams`);
  });
  client.close();
});

Deno.test("app: admission control answers 429 with Retry-After when slots and queue are full", async () => {
  const w = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 1 } });
  await withFleet([w], async (g) => {
    const held = await post(g, "/v1/chat/completions", { ...chat, stream: true });
    const reader = held.body!.getReader();
    await reader.read();
    const r = await post(g, "/v1/chat/completions", chat);
    assert.equal(r.status, 429);
    assert.equal(r.headers.get("retry-after"), "2");
    assert.equal((await r.json()).error.code, "admission_queue_full");
    await reader.cancel();
    const probe = await fetch(`${g.url}/health`);
    assert.equal(probe.status, 200, "probes are not subject to admission");
    await probe.body?.cancel();
  }, { admission: { maxConcurrentRequests: 1, queueSize: 0 } });
});

Deno.test("app: the API key guards inference and workers but not probes", async () => {
  await withFleet([new FakeWorker()], async (g) => {
    const no = await post(g, "/v1/chat/completions", chat);
    assert.equal(no.status, 401);
    assert.equal(no.headers.get("www-authenticate"), 'Bearer realm="smg"');
    assert.deepEqual(await no.json(), {
      error: {
        message: "missing API key: send 'Authorization: Bearer <key>'",
        type: "Unauthorized",
        code: "unauthorized",
        param: null,
      },
    });
    const wrong = await post(g, "/v1/chat/completions", chat, { authorization: "Bearer sekreT" });
    assert.equal(wrong.status, 401);
    assert.equal((await wrong.json()).error.message, "invalid API key");
    const yes = await post(g, "/v1/chat/completions", chat, { authorization: "Bearer sekret" });
    assert.equal(yes.status, 200);
    await yes.body?.cancel();
    assert.equal(await fetch(`${g.url}/workers`).then((r) => (r.body?.cancel(), r.status)), 401);
    assert.equal(await fetch(`${g.url}/health`).then((r) => r.text()), "OK");
  }, { apiKey: "sekret" });
});

Deno.test("app: worker API adds, shows, refuses duplicates and removes workers", async () => {
  const b = new FakeWorker({ model: "other-model" });
  await withFleet([new FakeWorker()], async (g) => {
    const list0 = await (await fetch(`${g.url}/workers`)).json();
    assert.equal(list0.total, 1);
    const add = await post(g, "/workers", { url: b.url });
    assert.equal(add.status, 202);
    const added = await add.json();
    assert.equal(add.headers.get("location"), `/workers/${added.worker_id}`);
    assert.equal(
      (await post(g, "/workers", { url: b.url }).then((r) => r.json())).code,
      "WORKER_ALREADY_EXISTS",
    );
    const bad = await post(g, "/workers", { url: "ftp://x" });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).code, "BAD_REQUEST");
    await g.ready(2);
    const one = await (await fetch(`${g.url}/workers/${added.worker_id}`)).json();
    assert.equal(one.status, "ready");
    assert.equal(one.model_id, "other-model");
    assert.equal(one.api_key, undefined);
    const r = await post(g, "/v1/chat/completions", { ...chat, model: "other-model" });
    assert.equal(r.headers.get("x-smg-routed-worker-id"), added.worker_id);
    await r.body?.cancel();
    const models = await (await fetch(`${g.url}/v1/models`)).json();
    assert.deepEqual(models.data.map((m: { id: string }) => m.id), ["test-model", "other-model"]);
    const filtered = await (await fetch(`${g.url}/workers?model=other-model`)).json();
    assert.equal(filtered.total, 1);
    assert.equal(
      await fetch(`${g.url}/workers/not-a-uuid`).then((r) => (r.body?.cancel(), r.status)),
      400,
    );
    const del = await fetch(`${g.url}/workers/${added.worker_id}`, { method: "DELETE" });
    assert.equal(del.status, 202);
    await del.body?.cancel();
    const registry = g.gw.registry;
    await until(() => registry.size === 1, (l) => registry.subscribe(l), "the removal");
    const gone = await fetch(`${g.url}/workers/${added.worker_id}`);
    assert.equal(gone.status, 404);
    assert.equal((await gone.json()).code, "WORKER_NOT_FOUND");
  });
  await b.close();
});

Deno.test("app: probes, info pass-through, loads and cache flush", async () => {
  const w = new FakeWorker({
    loads: {
      timestamp: "t",
      dp_rank_count: 1,
      loads: [{ dp_rank: 0, num_running_reqs: 2, num_used_tokens: 321 }],
    },
  });
  await withFleet([w], async (g) => {
    assert.equal(await fetch(`${g.url}/liveness`).then((r) => r.text()), "OK");
    const ready = await (await fetch(`${g.url}/readiness`)).json();
    assert.deepEqual(ready, { status: "ready", healthy_workers: 1, total_workers: 1 });
    const info = await fetch(`${g.url}/get_server_info`);
    assert.equal((await info.json()).version, "fake");
    assert.equal(await fetch(`${g.url}/health_generate`).then((r) => r.text()), "OK");
    const loads = await (await fetch(`${g.url}/get_loads`)).json();
    assert.equal(loads.workers[0].load, 321);
    const flush = await post(g, "/flush_cache", {});
    assert.equal(flush.status, 200);
    assert.equal((await flush.json()).workers_flushed, 1);
    assert.equal(w.seen.flushes, 1);
    assert.equal(await fetch(`${g.url}/nope`).then((r) => (r.body?.cancel(), r.status)), 404);
  });
});

Deno.test("app: metrics use SMG's names and count per-worker requests and TTFT", async () => {
  await withFleet([new FakeWorker()], async (g) => {
    await (await post(g, "/v1/chat/completions", chat)).text();
    await (await post(g, "/v1/chat/completions", { ...chat, stream: true })).text();
    const text = await (await fetch(g.metricsUrl)).text();
    for (
      const name of [
        "smg_http_requests_total",
        "smg_router_requests_total",
        "smg_worker_selection_total",
        "smg_worker_requests_active",
        "smg_worker_health",
        "smg_worker_cb_state",
        "smg_worker_requests_total",
        "smg_router_ttft_seconds_count",
      ]
    ) assert.match(text, new RegExp(`^${name}`, "m"), name);
    assert.match(
      text,
      /smg_worker_requests_total\{worker="http:\/\/127\.0\.0\.1:\d+",outcome="success"\} 2/,
    );
  });
});

Deno.test("app: shutdown turns readiness to 503 and lets an in-flight stream finish", async () => {
  const gate = Promise.withResolvers<void>();
  const w = new FakeWorker({ chunks: 20, gate: gate.promise });
  const clock = new FakeClock();
  const g = await startGateway([w.url], { shutdownGracePeriodSecs: 2 }, { clock });
  try {
    const r = await post(g, "/v1/chat/completions", { ...chat, stream: true });
    const body = r.text();
    const done = g.close();
    const ready = await fetch(`${g.url}/readiness`);
    assert.equal(ready.status, 503);
    assert.equal((await ready.json()).reason, "draining");
    clock.advance(1000); // the settle window (half the grace period) is over
    gate.resolve(); // the worker finishes the stream during the rest of the grace period
    assert.match(await body, /data: \[DONE\]/);
    await done;
  } finally {
    gate.resolve();
    await w.close();
  }
});

Deno.test("app: a worker's policy label gives its model its own policy", async () => {
  const b = new FakeWorker({ model: "other-model" });
  await withFleet([new FakeWorker()], async (g) => {
    const add = await post(g, "/workers", { url: b.url, labels: { policy: "random" } });
    assert.equal(add.status, 202);
    await add.body?.cancel();
    await g.ready(2);
    for (const model of ["test-model", "other-model"]) {
      const r = await post(g, "/v1/chat/completions", { ...chat, model });
      await r.body?.cancel();
    }
    const text = await (await fetch(g.metricsUrl)).text();
    assert.match(text, /smg_worker_selection_total\{[^}]*model="other-model",policy="random"\} 1/);
    assert.match(
      text,
      /smg_worker_selection_total\{[^}]*model="test-model",policy="round_robin"\} 1/,
    );
  });
  await b.close();
});
