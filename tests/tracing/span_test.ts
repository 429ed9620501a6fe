/**
 * Spans leave with their trace's root: a child annotated after it ended (an attempt's failure,
 * known once its slot is released) still carries it; a child still open when the root ends leaves
 * when it ends; nothing leaves twice. `timed` ends a span with its work, failed if it rejects.
 */

import assert from "node:assert/strict";
import { type Span, SpanKind, timed, Tracer } from "../../lib/tracing/span.ts";

function setup() {
  const out: Span[] = [];
  const tracer = new Tracer({ sampler: () => true, sink: { push: (s) => out.push(s) } });
  return { out, root: tracer.request("POST /x", null, null).server! };
}

Deno.test("span: a trace leaves when its root ends; a child told after its end keeps what it is told", () => {
  const { out, root } = setup();
  const leg = root.child("chat m", SpanKind.client);
  const inner = leg.child("inner");
  leg.finish();
  inner.finish();
  assert.equal(out.length, 0, "nothing before the root ends");
  leg.set("smg.retryable", true).fail("worker answered 503");
  root.finish();
  assert.deepEqual(out.map((s) => s.name), ["POST /x", "chat m", "inner"]);
  assert.deepEqual(out[1].attrs, ["smg.retryable", true]);
  assert.equal(out[2].parentId, leg.spanId);
  root.finish();
  leg.finish();
  assert.equal(out.length, 3, "nothing twice");
});

Deno.test("span: a child still open at the root's end leaves when it ends", () => {
  const { out, root } = setup();
  const drain = root.child("prefill drain", SpanKind.client);
  root.finish();
  assert.deepEqual(out.map((s) => s.name), ["POST /x"]);
  const late = root.child("late");
  drain.finish();
  late.finish();
  assert.deepEqual(out.map((s) => s.name), ["POST /x", "prefill drain", "late"]);
});

Deno.test("span: timed ends with its work, failed when it rejects", async () => {
  const { out, root } = setup();
  assert.equal(await timed(root.child("ok"), Promise.resolve(3), (s, v) => s.set("v", v)), 3);
  await assert.rejects(timed(root.child("bad"), Promise.reject(new Error("no"))), /no/);
  assert.equal(await timed(null, Promise.resolve(1)), 1);
  root.finish();
  const [, ok, bad] = out;
  assert.deepEqual(ok.attrs, ["v", 3]);
  assert.ok(ok.end >= ok.start && ok.end > 0);
  assert.equal(bad.status, 2);
  assert.equal(bad.message, "no");
});
