import assert from "node:assert/strict";
import type { WorkerStatus } from "../../lib/core/types.ts";
import {
  applyProbe,
  type HealthCounters,
  type HealthThresholds,
} from "../../lib/workers/health_state.ts";

const T: HealthThresholds = { success: 2, failure: 3 };

/** Feeds `probes` (true = ok) from `start` and returns the status after each one. */
function run(
  start: WorkerStatus,
  probes: boolean[],
  t = T,
  startupExpired = false,
): WorkerStatus[] {
  let status = start;
  let counters: HealthCounters = { ok: 0, fail: 0 };
  const out: WorkerStatus[] = [];
  for (const ok of probes) {
    ({ status, counters } = applyProbe(status, counters, ok, t, startupExpired));
    out.push(status);
  }
  return out;
}

const ok = true;
const no = false;

Deno.test("applyProbe: transition table", () => {
  const table: {
    name: string;
    start: WorkerStatus;
    probes: boolean[];
    expired?: boolean;
    want: WorkerStatus[];
  }[] = [
    { name: "pending: first ok activates", start: "pending", probes: [ok], want: ["ready"] },
    {
      name: "pending: failures wait while start-up time remains",
      start: "pending",
      probes: [no, no, no, no, no, no, no, no, no, no],
      want: Array(10).fill("pending"),
    },
    {
      name: "pending: failure after start-up expired fails the worker",
      start: "pending",
      probes: [no],
      expired: true,
      want: ["failed"],
    },
    {
      name: "pending: ok after start-up expired still activates",
      start: "pending",
      probes: [ok],
      expired: true,
      want: ["ready"],
    },
    {
      name: "ready: F consecutive failures take it out",
      start: "ready",
      probes: [no, no, no],
      want: ["ready", "ready", "not_ready"],
    },
    {
      name: "ready: an ok between failures restarts the count",
      start: "ready",
      probes: [no, no, ok, no, no, ok],
      want: ["ready", "ready", "ready", "ready", "ready", "ready"],
    },
    {
      name: "not_ready: S consecutive oks bring it back",
      start: "ready",
      probes: [no, no, no, ok, ok],
      want: ["ready", "ready", "not_ready", "not_ready", "ready"],
    },
    {
      name: "not_ready: a failure between oks restarts the count",
      start: "ready",
      probes: [no, no, no, ok, no, ok, ok],
      want: ["ready", "ready", "not_ready", "not_ready", "not_ready", "not_ready", "ready"],
    },
    {
      name: "not_ready: 3F consecutive failures in all fail the worker",
      start: "ready",
      probes: Array(9).fill(no),
      want: [...Array(2).fill("ready"), ...Array(6).fill("not_ready"), "failed"],
    },
    {
      name: "failed: S oks recover it",
      start: "failed",
      probes: [no, ok, ok],
      want: ["failed", "failed", "ready"],
    },
    {
      name: "draining: nothing moves it",
      start: "draining",
      probes: [ok, ok, ok, no, no, no, no, no, no, no, no, no, no],
      want: Array(13).fill("draining"),
    },
  ];
  for (const c of table) {
    assert.deepEqual(run(c.start, c.probes, T, c.expired ?? false), c.want, c.name);
  }
});

Deno.test("applyProbe: thresholds of 1 react to a single probe", () => {
  const t = { success: 1, failure: 1 };
  assert.deepEqual(run("ready", [no, ok, no, no, no], t), [
    "not_ready",
    "ready",
    "not_ready",
    "not_ready",
    "failed",
  ]);
});

Deno.test("applyProbe: counters count consecutive results and do not mutate the input", () => {
  const before = { ok: 4, fail: 0 };
  const step = applyProbe("ready", before, false, T);
  assert.deepEqual(step.counters, { ok: 0, fail: 1 });
  assert.deepEqual(before, { ok: 4, fail: 0 });
  const again = applyProbe("ready", step.counters, true, T);
  assert.deepEqual(again.counters, { ok: 1, fail: 0 });
});

Deno.test("applyProbe: a failed worker that recovers needs S oks, as a not_ready one does", () => {
  const t = { success: 4, failure: 2 };
  const history = run("ready", [...Array(6).fill(no), ok, ok, ok, ok], t);
  assert.equal(history[5], "failed");
  assert.deepEqual(history.slice(6), ["failed", "failed", "failed", "ready"]);
});
