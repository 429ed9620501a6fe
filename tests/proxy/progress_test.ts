/**
 * An attempt's progress deadlines as values (`progressDeadlines`, `tokenBudget`) and a worker's
 * stall exclusion (`WorkerProgress`), in fake time.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { progressDeadlines, tokenBudget } from "../../lib/proxy/progress.ts";
import { WEDGE_MS, WorkerProgress } from "../../lib/workers/progress.ts";
import { workerSetup } from "../support/workers.ts";
import { newNote, selectWorker } from "../../lib/proxy/select.ts";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { CounterSeries } from "../../lib/metrics/fast.ts";
import { request } from "../../support/policies.ts";

function worker(clock: FakeClock) {
  const { manager } = workerSetup(clock);
  return manager.add({ url: "http://127.0.0.1:1", models: ["m"] });
}

Deno.test("progress: a token budget is max_completion_tokens, max_tokens or sampling_params.max_new_tokens", () => {
  assert.equal(tokenBudget({ max_tokens: 16 }), 16);
  assert.equal(tokenBudget({ max_completion_tokens: 8, max_tokens: 16 }), 8);
  assert.equal(tokenBudget({ sampling_params: { max_new_tokens: 4 } }), 4);
  assert.equal(tokenBudget({ max_tokens: "16" }), null);
  assert.equal(tokenBudget({}), null);
  assert.equal(tokenBudget(null), null);
});

Deno.test("progress: a whole answer's head deadline grows with its budget; none without one or with H = 0", () => {
  const clock = new FakeClock();
  const w = worker(clock);
  const d = (body: unknown, head = 30) =>
    progressDeadlines(clock, w, false, body, head, 20, () => false);
  assert.equal(d({ max_tokens: 100 }).headTimeoutMs, 30_000 + 25_000);
  assert.equal(d({}).headTimeoutMs, 0);
  assert.equal(d({ max_tokens: 100 }, 0).headTimeoutMs, 0);
  assert.equal(d({}).idleTimeoutMs, 20_000);
  const s = progressDeadlines(clock, w, true, { max_tokens: 100 }, 30, 20, () => false);
  assert.equal(s.headTimeoutMs, 30_000, "a stream's head comes before its prefill: no budget");
});

Deno.test("progress: the wait for a first piece or a whole head is waived while the worker progresses elsewhere", () => {
  const clock = new FakeClock(1000);
  const w = worker(clock);
  let first = false;
  const stream = progressDeadlines(clock, w, true, {}, 30, 20, () => first);
  const whole = progressDeadlines(clock, w, false, { max_tokens: 1 }, 30, 20, () => false);
  assert.equal(stream.excused!("body"), false, "nothing ever came from the worker");
  assert.equal(whole.excused!("head"), false);
  w.progress.saw(clock.now());
  clock.advance(19_999);
  assert.equal(stream.excused!("body"), true, "busy with others: queued, not hung");
  assert.equal(whole.excused!("head"), true);
  assert.equal(stream.excused!("head"), false, "a stream's head is never waived");
  assert.equal(whole.excused!("body"), false, "nor a body's silence once it flows");
  first = true;
  assert.equal(stream.excused!("body"), false, "after the first piece, a silence is a silence");
  first = false;
  clock.advance(1);
  assert.equal(stream.excused!("body"), false, "the worker silent for the idle deadline too");
});

Deno.test("progress: a stall excludes the worker until progress or the end of its period", () => {
  const p = new WorkerProgress();
  assert.equal(p.stalled(0), false);
  p.stall(100, 50);
  assert.equal(p.stalled(149), true);
  assert.equal(p.stalledSince(120), 100);
  assert.equal(p.stalled(150), false);
  assert.equal(p.stalledSince(150), null);
  p.stall(200, 50);
  p.stall(220, 50); // another miss extends it, from the first
  assert.equal(p.stalled(260), true);
  assert.equal(p.stalledSince(260), 200);
  p.saw(261);
  assert.equal(p.stalled(262), false, "progress ends it");
  assert.equal(p.recent(270, 10), true);
  assert.equal(p.recent(271, 10), false);
});

Deno.test("progress: a worker waited on mid-stream and silent for WEDGE_MS is left out until its next piece", () => {
  const p = new WorkerProgress();
  let t = 1000;
  const now = () => t;
  p.saw(t);
  p.wait(true, now);
  t += WEDGE_MS - 1;
  assert.equal(p.stalled(t), false);
  t += 1;
  assert.equal(p.stalled(t), true, "silent on the stream it is waited on");
  assert.equal(p.stalledSince(t), t);
  p.saw(t);
  assert.equal(p.stalled(t), false, "a piece ends it");
  p.wait(false, now);
  t += 10 * WEDGE_MS;
  assert.equal(p.stalled(t), false, "nobody waits on it: a slow client, or nothing in flight");
  p.wait(true, now);
  assert.equal(p.stalled(t), false, "the wait starts now, not at its last piece");
  t += WEDGE_MS;
  assert.equal(p.stalled(t), true);
});

Deno.test("progress: a stalled worker is left out while another can serve, and tried when none can", () => {
  const clock = new FakeClock(1000);
  const { manager } = workerSetup(clock);
  const a = manager.add({ url: "http://127.0.0.1:1", models: ["m"] });
  const b = manager.add({ url: "http://127.0.0.1:2", models: ["m"] });
  for (const w of [a, b]) w.setStatus("ready");
  a.progress.stall(clock.now(), 60_000);
  const env = { clock, shed: new CounterSeries(), overloadedRetryAfter: 5 };
  const rr = request("hello", { model: "m" });
  const pick = (candidates: typeof a[]) =>
    selectWorker(env, {
      candidates,
      failed: new Set(),
      rr,
      retrying: false,
      policy: new RoundRobinPolicy(),
      note: newNote(rr),
    });
  for (let i = 0; i < 4; i++) assert.equal(pick([a, b]), b, "the stalled one is left out");
  assert.equal(pick([a]), a, "alone, it is tried rather than a 503");
  b.setStatus("not_ready");
  assert.equal(pick([a, b]), a);
});

Deno.test("progress: a wait for an answer's start is given up on once its worker stalls after it was sent, if another can serve", () => {
  const clock = new FakeClock(1000);
  const w = worker(clock);
  let other = true;
  let first = false;
  const stream = progressDeadlines(clock, w, true, {}, 30, 20, () => first, () => other);
  const whole = progressDeadlines(
    clock,
    w,
    false,
    { max_tokens: 9 },
    30,
    20,
    () => false,
    () => other,
  );
  assert.equal(stream.doomed!("head"), false, "the worker is fine");
  clock.advance(10);
  w.progress.stall(clock.now(), 20_000);
  assert.equal(stream.doomed!("head"), true, "stalled after it was sent: retried elsewhere");
  assert.equal(stream.doomed!("body"), true, "a first piece is an answer's start too");
  assert.equal(whole.doomed!("head"), true);
  assert.equal(whole.doomed!("body"), false, "a whole body has started");
  first = true;
  assert.equal(stream.doomed!("body"), false, "mid-stream, its own deadline decides");
  first = false;
  other = false;
  assert.equal(stream.doomed!("head"), false, "with nowhere else to go, it waits");
  other = true;
  const late = progressDeadlines(clock, w, true, {}, 30, 20, () => false, () => true);
  assert.equal(late.doomed!("head"), false, "sent to a worker already stalled (no other was free)");
});
