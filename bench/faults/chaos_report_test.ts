/**
 * The chaos benchmark's own logic, no processes: the fault plan, what counts as broken and as a
 * client-visible failure, percentiles, the counters read from `/metrics`, and the table.
 */

import assert from "node:assert/strict";
import type { StreamRecord } from "./chaos_client.ts";
import { faultPlan, type FaultRecord } from "./chaos_faults.ts";
import {
  breakOf,
  counterBy,
  failuresOf,
  groupTable,
  judge,
  markdown,
  percentile,
  summarize,
} from "./chaos_report.ts";

/** A stream's record: a whole answer of the reference's text, first event 100 ms in. */
function record(over: Partial<StreamRecord> = {}): StreamRecord {
  const startMs = over.startMs ?? 1000;
  return {
    n: 0,
    startMs: 1000,
    endMs: 4000,
    status: 200,
    worker: "id-a",
    done: true,
    errorEvents: [],
    failure: null,
    text: "hello there",
    usage: { prompt_tokens: 10, completion_tokens: 3 },
    ids: 1,
    events: 5,
    maxGapMs: 20,
    firstEventMs: startMs + 100,
    ...over,
  };
}

const REF = { text: "hello there", completionTokens: 3 };
const URLS = new Map([["id-a", "http://a"], ["id-b", "http://b"]]);
const urlOf = (id: string) => URLS.get(id);

function fault(over: Partial<FaultRecord> = {}): FaultRecord {
  return {
    kind: "kill",
    worker: 0,
    url: "http://a",
    atMs: 2000,
    forMs: 3000,
    startMs: 2000,
    endMs: 5500,
    ...over,
  };
}

Deno.test("faultPlan alternates kill and stall over the workers in turn, all over by the end", () => {
  const plan = faultPlan({
    workers: 4,
    durationMs: 60_000,
    everyMs: 10_000,
    restartMs: 3000,
    stallMs: 10_000,
  });
  assert.deepEqual(
    plan.map((f) => [f.kind, f.worker, f.atMs, f.forMs]),
    [
      ["kill", 0, 10_000, 3000],
      ["stall", 1, 20_000, 10_000],
      ["kill", 2, 30_000, 3000],
      ["stall", 3, 40_000, 10_000],
      ["kill", 0, 50_000, 3000],
    ],
  );
});

Deno.test("faultPlan leaves out a fault past the load's end or on a worker still faulted", () => {
  // A 40 s stall (20 s idle deadline): the one at 40 s would end at 80 s.
  const long = faultPlan({
    workers: 4,
    durationMs: 60_000,
    everyMs: 10_000,
    restartMs: 3000,
    stallMs: 40_000,
  });
  assert.deepEqual(long.map((f) => [f.kind, f.atMs]), [
    ["kill", 10_000],
    ["stall", 20_000],
    ["kill", 30_000],
    ["kill", 50_000],
  ]);
  // Two workers: worker 1's stall at 20 s still runs at 40 s, when its turn comes again.
  const two = faultPlan({
    workers: 2,
    durationMs: 60_000,
    everyMs: 10_000,
    restartMs: 3000,
    stallMs: 25_000,
  });
  assert.deepEqual(two.map((f) => [f.kind, f.worker, f.atMs]), [
    ["kill", 0, 10_000],
    ["stall", 1, 20_000],
    ["kill", 0, 30_000],
    ["kill", 0, 50_000],
  ]);
});

Deno.test("a stream is broken when its first worker was faulted while it was open", () => {
  const f = [fault()];
  assert.equal(breakOf(record(), f, urlOf), "killed");
  assert.equal(breakOf(record({ worker: "id-b" }), f, urlOf), null, "another worker");
  assert.equal(breakOf(record({ startMs: 0, endMs: 1999 }), f, urlOf), null, "ended before");
  assert.equal(breakOf(record({ startMs: 5600, endMs: 9000 }), f, urlOf), null, "after");
  assert.equal(breakOf(record({ worker: null, status: 0 }), f, urlOf), null, "no response");
  // A fault the worker never came back from is open to the end.
  assert.equal(
    breakOf(record({ startMs: 8000, endMs: 9000 }), [fault({ endMs: NaN })], urlOf),
    "killed",
  );
  // Everything came after the killed worker was back: it reached the new process, late.
  assert.equal(breakOf(record({ startMs: 1000, firstEventMs: 5600, endMs: 9000 }), f, urlOf), null);
  // A freeze: with events before it, or before the first one came.
  const frozen = [fault({ kind: "stall" })];
  assert.equal(breakOf(record(), frozen, urlOf), "frozen mid-stream");
  assert.equal(
    breakOf(record({ startMs: 1900, firstEventMs: 5600 }), frozen, urlOf),
    "frozen before its first event",
  );
  assert.equal(
    breakOf(record({ firstEventMs: NaN, status: 200, done: false }), frozen, urlOf),
    "frozen before its first event",
  );
});

Deno.test("failures are what a client notices; a cut stream is not also a text mismatch", () => {
  assert.deepEqual(failuresOf(record(), REF), []);
  assert.deepEqual(failuresOf(record({ status: 0, worker: null }), REF), ["no response"]);
  assert.deepEqual(failuresOf(record({ status: 503 }), REF), ["status"]);
  assert.deepEqual(
    failuresOf(record({ errorEvents: ["{}"], done: false, text: "hel" }), REF),
    ["error event", "no [DONE]"],
  );
  assert.deepEqual(failuresOf(record({ failure: "reset", done: false }), REF), [
    "cut",
    "no [DONE]",
  ]);
  assert.deepEqual(failuresOf(record({ text: "hello where" }), REF), ["text"]);
  assert.deepEqual(failuresOf(record({ usage: null }), REF), ["usage"]);
  assert.deepEqual(failuresOf(record({ ids: 2 }), REF), ["ids"]);
});

Deno.test("percentile is the nearest rank; NaN with nothing", () => {
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1, unsorted
  assert.equal(percentile(xs, 0.5), 50);
  assert.equal(percentile(xs, 0.99), 99);
  assert.equal(percentile(xs, 1), 100);
  assert.equal(percentile([7], 0.99), 7);
  assert.ok(Number.isNaN(percentile([], 0.5)));
});

Deno.test("counterBy sums a counter's samples by one label", () => {
  const text = [
    "# HELP smg_stream_continuations_total x",
    'smg_stream_continuations_total{worker="http://a",result="continued"} 3',
    'smg_stream_continuations_total{worker="http://b",result="continued"} 2',
    'smg_stream_continuations_total{result="limit",worker="http://b"} 1',
    'smg_stream_continuations_total_other{result="continued"} 9',
  ].join("\n");
  assert.deepEqual(counterBy(text, "smg_stream_continuations_total", "result"), {
    continued: 5,
    limit: 1,
  });
  assert.deepEqual(counterBy(text, "smg_worker_progress_deadline_misses_total", "phase"), {});
});

Deno.test("summarize splits e2e by broken and counts failures; the tables have a row per run", () => {
  const records = [
    record({ n: 0, startMs: 0, endMs: 1000, worker: "id-b" }),
    record({ n: 1, startMs: 0, endMs: 3000, worker: "id-b" }),
    record({ n: 2, startMs: 1500, endMs: 6000, maxGapMs: 400 }), // killed, continued
    record({ n: 3, startMs: 1500, endMs: 2500, errorEvents: ["{}"], done: false, text: "he" }),
    record({ n: 4, startMs: 1500, endMs: 9000, text: "hello where" }), // killed, wrong text
    record({ n: 5, startMs: 7000, endMs: 12_000, worker: "id-b" }), // frozen
  ];
  const refs = new Map(records.map((r) => [r.n, REF]));
  const faults = [fault(), fault({ kind: "stall", url: "http://b", startMs: 8000, endMs: 9000 })];
  const verdicts = judge(records, refs, faults, urlOf);
  const metrics = 'smg_stream_continuations_total{worker="http://a",result="continued"} 2\n';
  const s = summarize({ migrationLimit: 3, idleSecs: 5 }, records, verdicts, faults, metrics);
  assert.equal(s.streams, 6);
  assert.equal(s.broken, 4);
  assert.equal(s.failed, 2);
  assert.equal(s.brokenFailed, 2);
  assert.equal(s.brokenMismatch, 1);
  assert.deepEqual(s.failures, { "error event": 1, "no [DONE]": 1, text: 1 });
  assert.deepEqual(s.unbrokenMs, { n: 2, p50: 1000, p99: 3000 });
  assert.deepEqual(s.brokenMs, { n: 2, p50: 4500, p99: 5000 });
  assert.deepEqual(s.byGroup.killed, {
    n: 3,
    failed: 2,
    ms: { n: 1, p50: 4500, p99: 4500 },
    firstEventMs: { n: 1, p50: 100, p99: 100 },
    maxGapMs: 400,
  });
  assert.equal(s.byGroup["not broken"].n, 2);
  assert.equal(s.byGroup["frozen mid-stream"].n, 1);
  assert.equal(s.byGroup["frozen before its first event"].n, 0);
  assert.deepEqual(s.continuations, { continued: 2 });
  const table = markdown([s, { ...s, migrationLimit: 0 }]).split("\n");
  assert.equal(table.length, 4);
  assert.match(table[2], /^\| 3 \| 5 \| 6 \| 2 \(/);
  assert.match(table[2], /\| 4\.50 \/ 5\.00 \(2\) \| 4\.50× \/ 1\.67× \|/);
  assert.match(table[3], /^\| 0 \|/);
  const groups = groupTable([s]).split("\n");
  assert.equal(groups.length, 2 + 4);
  assert.equal(groups[2], "| 3 | not broken | 2 | 0 | 1.00 / 3.00 | 0.10 / 0.10 | 0.02 |");
  assert.equal(groups[3], "| 3 | killed | 3 | 2 | 4.50 / 4.50 | 0.10 / 0.10 | 0.40 |");
  assert.equal(groups[5], "| 3 | frozen before its first event | 0 | 0 | – / – | – / – | 0.00 |");
});
