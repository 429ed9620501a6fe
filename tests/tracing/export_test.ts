/**
 * The export queue, in fake time: batches every delay (sooner when one is full), one export in
 * flight, a full queue drops and counts, a failed export drops its batch and counts it, drops
 * are logged at most once a minute, and close sends what is queued within its deadline.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { createLogger } from "../../lib/core/log.ts";
import { type QueueOptions, SpanQueue, type Transport } from "../../lib/tracing/export.ts";
import { OtlpEncoder } from "../../lib/tracing/otlp.ts";
import { Tracer } from "../../lib/tracing/span.ts";
import { CapturingTransport } from "../support/otlp.ts";

const OPTS: QueueOptions = { maxQueue: 8, batch: 4, delayMs: 500, timeoutMs: 1000 };

function setup(transport: Transport, o: Partial<QueueOptions> = {}) {
  const clock = new FakeClock();
  const lines: string[] = [];
  const log = createLogger({ sink: (l) => lines.push(l) });
  const counts = { exported: 0, queue_full: 0, export_failed: 0, collector_down: 0 };
  const queue = new SpanQueue(
    { ...OPTS, ...o },
    new OtlpEncoder({ resource: ["service.name", "t"], scope: { name: "t", version: "1" } }),
    transport,
    clock,
    log,
    {
      exported: (n) => counts.exported += n,
      dropped: (why, n) => counts[why] += n,
    },
  );
  const tracer = new Tracer({ sampler: () => true, sink: queue });
  const span = (name: string) => tracer.request(name, null, null).server!.finish();
  return { clock, lines, counts, queue, span };
}

/**
 * Lets the queue's promise chains settle (an export's `then`s, its `finally`): one turn of the
 * event loop with nothing timed in it. The clock is fake; there is no event to wait on, as the
 * transports here answer at once.
 */
const settle = () => new Promise((r) => setTimeout(r, 0));

Deno.test("export: a batch after the delay, at once when full; nothing before", async () => {
  const t = new CapturingTransport();
  const { clock, counts, span } = setup(t);
  span("a");
  clock.advance(499);
  await settle();
  assert.equal(t.batches, 0);
  clock.advance(1);
  await settle();
  assert.deepEqual(t.spans.map((s) => s.name), ["a"]);
  for (const n of ["b", "c", "d", "e"]) span(n); // a full batch goes without waiting
  clock.advance(0);
  await settle();
  assert.deepEqual(t.spans.map((s) => s.name), ["a", "b", "c", "d", "e"]);
  assert.equal(counts.exported, 5);
});

Deno.test("export: a full queue drops and counts; a failed export drops its batch; logged once a minute", async () => {
  const t = new CapturingTransport();
  t.fail = new Error("connection refused");
  const { clock, counts, lines, span, queue } = setup(t, { batch: 100 });
  for (let i = 0; i < 10; i++) span(`s${i}`);
  assert.equal(queue.size, 8);
  assert.equal(counts.queue_full, 2);
  clock.advance(500);
  await settle();
  assert.equal(counts.export_failed, 8);
  assert.equal(queue.size, 0);
  assert.equal(lines.length, 1, "one line for the first drops");
  assert.match(lines[0], /trace spans dropped/);
  for (let i = 0; i < 3; i++) {
    span("more");
    clock.advance(500);
    await settle();
  }
  // The third failure in a row marks the collector down: the last span is not even encoded.
  assert.equal(counts.export_failed, 10);
  assert.equal(counts.collector_down, 1);
  assert.equal(lines.length, 1, "not again within the minute");
  clock.advance(60_000);
  span("later");
  clock.advance(500);
  await settle();
  assert.equal(lines.length, 2);
  assert.match(lines[1], /export_failed=\d+/);
});

Deno.test("export: after three failed exports in a row new spans are dropped unencoded, 1 s then doubling, until one succeeds", async () => {
  const t = new CapturingTransport();
  t.fail = new Error("connection refused");
  const { clock, counts, span } = setup(t, { batch: 1 });
  for (let i = 0; i < 3; i++) {
    span(`s${i}`);
    clock.advance(0);
    await settle();
  }
  assert.equal(counts.export_failed, 3);
  span("while down");
  assert.equal(counts.collector_down, 1, "not encoded, not queued");
  clock.advance(1000); // the first pause is over: the next span is a probe
  span("probe");
  clock.advance(0);
  await settle();
  assert.equal(counts.export_failed, 4);
  clock.advance(1999);
  span("still down");
  assert.equal(counts.collector_down, 2, "the pause doubled");
  clock.advance(1);
  t.fail = null;
  span("back");
  clock.advance(0);
  await settle();
  assert.equal(counts.exported, 1);
  span("up");
  clock.advance(0);
  await settle();
  assert.equal(counts.exported, 2);
  assert.deepEqual(t.spans.map((s) => s.name), ["back", "up"]);
});

Deno.test("export: one export in flight; the next batch waits for it", async () => {
  let release = () => {};
  let sends = 0;
  const slow: Transport = {
    target: "slow",
    send: () => {
      sends++;
      return new Promise<void>((r) => release = r);
    },
    close: () => {},
  };
  const { clock, counts, span } = setup(slow);
  for (let i = 0; i < 8; i++) span(`s${i}`);
  clock.advance(0);
  await settle();
  assert.equal(sends, 1);
  clock.advance(5000);
  await settle();
  assert.equal(sends, 1, "still the first");
  release();
  await settle();
  clock.advance(0);
  await settle();
  assert.equal(sends, 2);
  release();
  await settle();
  assert.equal(counts.exported, 8);
});

Deno.test("export: close sends what is queued, then takes nothing; a stuck collector costs its deadline", async () => {
  const t = new CapturingTransport();
  const { counts, span, queue } = setup(t);
  span("a");
  span("b");
  await queue.close(1000);
  assert.deepEqual(t.spans.map((s) => s.name), ["a", "b"]);
  assert.ok(t.closed);
  span("late");
  assert.equal(counts.queue_full, 1);

  const stuck: Transport = { target: "stuck", send: () => new Promise(() => {}), close: () => {} };
  const s2 = setup(stuck);
  s2.span("x");
  const closing = s2.queue.close(2000);
  s2.clock.advance(2000);
  await closing;
  assert.equal(s2.counts.exported, 0);
});
