/**
 * Progress deadlines over real loopback HTTP, in fake time: a whole answer's head (the head
 * deadline plus its token budget), a stream's first piece and its silences
 * (`--stream-idle-timeout-secs`), each retried while nothing reached the client, and the worker
 * that missed one left out of new requests until it shows progress again.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";
import type { Worker } from "../../lib/workers/worker.ts";

const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };
const DEADLINES = { requestTimeoutSecs: 600, streamHeadTimeoutSecs: 1, streamIdleTimeoutSecs: 2 };

function post(g: TestGateway, body: unknown) {
  return fetch(g.url + "/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/**
 * Moves fake time on by `stepMs` at a time, letting the gateway run in between, until `p`
 * settles; returns its value and the fake time it took. Fails past `maxMs` of fake time.
 */
async function pump<T>(clock: FakeClock, p: Promise<T>, stepMs = 100, maxMs = 60_000) {
  let settled = false;
  const done = p.finally(() => settled = true);
  const start = clock.now();
  while (!settled) {
    if (clock.now() - start > maxMs) throw new Error(`not settled within ${maxMs} ms fake time`);
    await new Promise((r) => setTimeout(r, 1));
    if (!settled) clock.advance(stepMs);
  }
  return { value: await done, tookMs: clock.now() - start };
}

/** A gateway over `workers` on fake time, with only the first one routable until `fn` opens the rest. */
async function withFleet(
  workers: FakeWorker[],
  fn: (g: TestGateway, clock: FakeClock, ws: Worker[]) => Promise<void>,
  over: Partial<typeof DEADLINES> & { streamMigrationLimit?: number } = {},
) {
  const clock = new FakeClock();
  const o = { ...DEADLINES, streamMigrationLimit: 3, ...over };
  const g = await startGateway(workers.map((w) => w.url), o, { clock });
  try {
    const ws = workers.map((f) => g.gw.registry.all().find((w) => w.url === f.url)!);
    for (const w of ws.slice(1)) w.setStatus("not_ready");
    await fn(g, clock, ws);
  } finally {
    await g.close();
    await Promise.all(workers.map((w) => w.close()));
  }
}

const atWorker = (w: FakeWorker, n = 1) =>
  until(() => w.seen.requests >= n, (l) => w.subscribe(l), "the request at the worker");

Deno.test("progress: a whole answer's head is awaited for the head deadline plus its budget, then retried; the worker is left out", async () => {
  const hung = new FakeWorker({ mode: { kind: "hang" } });
  const fine = new FakeWorker();
  await withFleet([hung, fine], async (g, clock, [silent, other]) => {
    const answer = post(g, { ...chat, max_tokens: 8 }); // 1 s + 8 × 0.25 s = 3 s
    await atWorker(hung);
    other.setStatus("ready");
    clock.advance(2900);
    assert.equal(hung.seen.aborted, 0, "not before 3 s");
    const { value: r, tookMs } = await pump(clock, answer);
    assert.ok(tookMs <= 1100, `given up within the sweep's second of 3 s (took ${tookMs} ms more)`);
    assert.equal(r.status, 200);
    await r.body?.cancel();
    assert.equal(fine.seen.requests, 1, "retried on the other worker");
    assert.equal(silent.available(clock.now()), false, "the silent worker gets no new requests");
    const next = await post(g, chat);
    assert.equal(next.status, 200);
    await next.body?.cancel();
    assert.equal(hung.seen.requests, 1, "the next request went elsewhere");
  });
});

Deno.test("progress: a whole answer with no token budget waits for the request deadline alone", async () => {
  const hung = new FakeWorker({ mode: { kind: "hang" } });
  await withFleet([hung], async (g, clock) => {
    const answer = post(g, chat);
    await atWorker(hung);
    clock.advance(300_000);
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(hung.seen.aborted, 0, "its head may come with its last token, however late");
    clock.advance(300_000);
    const r = await within(answer, "the request deadline");
    assert.equal(r.status, 504);
    await r.body?.cancel();
  });
});

Deno.test("progress: a stream's head and then silence is retried before anything reached the client", async () => {
  const mute = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 0 } });
  const fine = new FakeWorker();
  await withFleet([mute, fine], async (g, clock, [silent, other]) => {
    const stream = post(g, { ...chat, stream: true });
    await atWorker(mute);
    other.setStatus("ready");
    const { value: r, tookMs } = await pump(clock, stream);
    assert.ok(tookMs >= 2000 && tookMs <= 3100, `the idle deadline, 2 s (took ${tookMs} ms)`);
    assert.equal(r.status, 200);
    const text = await r.text();
    assert.match(text, /t0.*t1.*t2.*data: \[DONE\]/s, "the whole stream, from the other worker");
    assert.doesNotMatch(text, /event: error/);
    assert.equal(silent.available(clock.now()), false);
  });
});

Deno.test("progress: a stream silent mid-way, continuation off, ends with upstream_stream_stalled within its idle deadline plus 1 s", async () => {
  const staller = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 2 } });
  const fine = new FakeWorker();
  await withFleet([staller, fine], async (g, clock, [stalled, other]) => {
    const r = await post(g, { ...chat, stream: true });
    assert.equal(r.status, 200);
    other.setStatus("ready");
    const { value: text, tookMs } = await pump(clock, r.text());
    assert.ok(tookMs >= 2000 && tookMs <= 3000, `ended ${tookMs} ms after its last piece`);
    assert.match(text, /t0.*t1/s);
    assert.match(text, /event: error\ndata: .*"code":"upstream_stream_stalled"/);
    assert.equal(stalled.available(clock.now()), false, "excluded from the moment of the miss");
    const since = stalled.progress.stalledSince(clock.now())!;
    clock.advance(since + 1999 - clock.now());
    assert.equal(stalled.available(clock.now()), false, "until one idle deadline has passed");
    clock.advance(1);
    assert.equal(stalled.available(clock.now()), true, "then one request may try it again");
  }, { streamMigrationLimit: 0 });
});

Deno.test("progress: a stalled worker's exclusion ends as soon as one of its streams moves again", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const slow = new FakeWorker({ gate }); // first piece, then waits for the gate
  await withFleet([slow], async (g, clock, [w]) => {
    const r = await post(g, { ...chat, stream: true });
    const text = r.text();
    w.progress.stall(clock.now(), 60_000); // as if another stream on it had missed its deadline
    assert.equal(w.available(clock.now()), false);
    release();
    assert.match(await text, /data: \[DONE\]/);
    assert.equal(w.available(clock.now()), true, "its pieces are progress");
  });
});

Deno.test("progress: a worker silent mid-stream is left out of new requests within 3 s, long before its stream's deadline", async () => {
  const staller = new FakeWorker({ mode: { kind: "stall_mid_stream", afterChunks: 2 } });
  const fine = new FakeWorker();
  await withFleet([staller, fine], async (g, clock, [stalled]) => {
    const r = await post(g, { ...chat, stream: true });
    const text = r.text();
    const stallAt = clock.now();
    // Fake time runs, 100 ms a step, until the worker is left out; its stream waits on.
    for (let steps = 0; stalled.available(clock.now()) && steps < 100; steps++) {
      await new Promise((res) => setTimeout(res, 1));
      clock.advance(100);
    }
    const tookMs = clock.now() - stallAt;
    assert.ok(tookMs <= 3100, `left out ${tookMs} ms after its last piece`);
    assert.equal(staller.seen.aborted, 0, "its stream is not given up on yet");
    await pump(clock, text);
  }, { streamIdleTimeoutSecs: 20 });
});
