/**
 * A trace replayed at a speed: arrival times, which requests the window measures and when it
 * opens and closes, and the offer's requests (no network: a fake driver records them).
 */

import assert from "node:assert/strict";
import type { Driver, Outgoing } from "./client.ts";
import { arrivalMs, replayOffer, replayPlan } from "./replay.ts";
import type { StreamResult } from "./stream.ts";
import type { TraceRequest } from "./trace.ts";
import { BlockTexts, tracePrompt } from "./trace_prompts.ts";

const req = (timestampMs: number, outputLength = 4): TraceRequest => ({
  timestampMs,
  inputLength: 600,
  outputLength,
  hashIds: [timestampMs, timestampMs + 1],
});

/** Arrivals at 1 s, 2 s, ... 10 s after a first one at 1 s. */
const TRACE = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000].map((t) => req(t));

Deno.test("replay: request i arrives (timestamp − first timestamp) ÷ speed ms in", () => {
  assert.deepEqual(TRACE.map((_, i) => arrivalMs(TRACE, i, 1)), [
    0,
    1000,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
  ]);
  assert.equal(arrivalMs(TRACE, 4, 2.5), 1600);
  assert.equal(arrivalMs(TRACE, 9, 0.5), 18000);
});

Deno.test("replay: warm-up by count; the window closes at the duration, trace end or cap", () => {
  // At 2×: arrivals every 500 ms. Three unmeasured, then a 1.2-s window from 1.5 s: 3, 4, 5.
  assert.deepEqual(replayPlan(TRACE, { speed: 2, warmup: 3, durationS: 1.2, maxRequests: null }), {
    speed: 2,
    from: 3,
    to: 6,
    warmupMs: 1500,
    durationMs: 1200,
  });
  // The trace ends first: the window lasts up to the last arrival.
  assert.deepEqual(replayPlan(TRACE, { speed: 2, warmup: 3, durationS: 60, maxRequests: null }), {
    speed: 2,
    from: 3,
    to: 10,
    warmupMs: 1500,
    durationMs: 3000,
  });
  // The cap ends it: two measured requests.
  assert.deepEqual(replayPlan(TRACE, { speed: 1, warmup: 0, durationS: 60, maxRequests: 2 }), {
    speed: 1,
    from: 0,
    to: 2,
    warmupMs: 0,
    durationMs: 1000,
  });
  assert.throws(
    () => replayPlan(TRACE, { speed: 1, warmup: 10, durationS: 60, maxRequests: null }),
    /--trace-warmup 10 leaves none of the trace's 10 requests to measure/,
  );
});

/** A driver that records what is sent and answers at once; `onSend` may act on each request. */
function fakeDriver(onSend: (r: Outgoing, d: Driver) => void = () => {}) {
  const sent: { r: Outgoing; atMs: number }[] = [];
  const stopper = new AbortController();
  const t0 = performance.now();
  const tracked: Promise<void>[] = [];
  const d: Driver = {
    t0,
    stop: stopper.signal,
    stopAt: Infinity,
    open: () => !stopper.signal.aborted,
    send: (r) => {
      sent.push({ r, atMs: performance.now() - t0 });
      onSend(r, d);
      const result: StreamResult = {
        ok: true,
        status: 200,
        error: null,
        ttftMs: 1,
        e2eMs: 1,
        text: "ok",
        usage: null,
      };
      return Promise.resolve(result);
    },
    track: (p) => void tracked.push(p),
  };
  return { d, sent, stopper, tracked };
}

Deno.test("replay: the offer sends the plan's requests in order, as one-message chats", async () => {
  const trace = [0, 0, 2, 4, 6, 8].map((t, i) => req(t, 10 + i));
  const plan = replayPlan(trace, { speed: 1, warmup: 2, durationS: 0.005, maxRequests: null });
  assert.equal(plan.to, 5, "the request at 8 ms arrives after the 5-ms window");
  const f = fakeDriver();
  const blocks = new BlockTexts(0);
  await replayOffer(trace, plan, blocks, (i) => ({ "x-smg-routing-key": `k${i}` }))(f.d);
  await Promise.all(f.tracked);
  assert.deepEqual(f.sent.map((s) => s.r.session), ["r0", "r1", "r2", "r3", "r4"]);
  assert.deepEqual(f.sent.map((s) => s.r.measured), [false, false, true, true, true]);
  assert.deepEqual(f.sent.map((s) => s.r.maxTokens), [10, 11, 12, 13, 14]);
  assert.deepEqual(f.sent[3].r.headers, { "x-smg-routing-key": "k3" });
  assert.deepEqual(f.sent[3].r.messages, [
    { role: "user", content: tracePrompt(new BlockTexts(0), trace[3]) },
  ]);
  // Each leaves no earlier than its arrival.
  f.sent.forEach((s, i) => assert.ok(s.atMs >= arrivalMs(trace, i, 1) - 0.5, `request ${i}`));
  // Without a route, no header.
  const g = fakeDriver();
  await replayOffer(trace, plan, blocks)(g.d);
  assert.deepEqual(g.sent[0].r.headers, {});
});

Deno.test("replay: the offer stops at once when the driver stops", async () => {
  // The second request is due in a minute; stopping during the first ends the offer now.
  const trace = [req(0), req(60_000)];
  const plan = replayPlan(trace, { speed: 1, warmup: 0, durationS: 120, maxRequests: null });
  let stopper: AbortController | null = null;
  const f = fakeDriver(() => stopper!.abort());
  stopper = f.stopper;
  await replayOffer(trace, plan, new BlockTexts(0))(f.d);
  assert.equal(f.sent.length, 1);
});
