/**
 * The OTLP encoder against OpenTelemetry's own definitions: every field the gateway writes
 * (ids, parent, trace state, name, kind, times, attributes of each type, events, status) reads
 * back as written, through lengths that need one, two and three bytes, and non-ASCII text.
 */

import assert from "node:assert/strict";
import { OtlpEncoder } from "../../lib/tracing/otlp.ts";
import { type Span, SpanKind, Tracer } from "../../lib/tracing/span.ts";
import { decodeSpans } from "../support/otlp.ts";

const ORIGIN = {
  resource: ["service.name", "smg", "deployment.environment", "test"],
  scope: { name: "smg", version: "0.1.0" },
};

/** A tracer whose ended spans land in `out`, at wall time `t.now`. */
function tracer(out: Span[], t = { now: 1_800_000_000_000.25 }) {
  return new Tracer({ sampler: () => true, sink: { push: (s) => out.push(s) }, now: () => t.now });
}

Deno.test("otlp: spans read back as written with OpenTelemetry's definitions", () => {
  const out: Span[] = [];
  const clock = { now: 1_800_000_000_000.25 };
  const tr = tracer(out, clock);
  const req = tr.request(
    "POST /v1/chat/completions",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "k=v",
  );
  const server = req.server!;
  server.set("s", "text").set("i", 42).set("neg", -7).set("big", 2 ** 40).set("f", 0.5)
    .set("yes", true).set("no", false).set("skipped", null).put("i", 43);
  clock.now += 1.5;
  const leg = req.child("chat m", SpanKind.client)!;
  leg.event("first_token", null).event("usage", ["gen_ai.usage.output_tokens", 12]);
  leg.fail("worker answered 502");
  clock.now += 10;
  leg.finish();
  server.finish();
  const spans = decodeSpans(new OtlpEncoder(ORIGIN).encode(out));
  assert.equal(spans.length, 2);
  // A trace leaves when its root ends: the root first, then its ended children.
  const [s, l] = spans;
  assert.equal(s.name, "POST /v1/chat/completions");
  assert.equal(s.kind, 2);
  assert.equal(s.traceId, "0af7651916cd43dd8448eb211c80319c");
  assert.equal(s.parentSpanId, "b7ad6b7169203331");
  assert.equal(s.spanId, server.spanId);
  assert.equal(s.traceState, "k=v");
  assert.deepEqual(s.attributes, {
    s: "text",
    i: 43,
    neg: -7,
    big: 2 ** 40,
    f: 0.5,
    yes: true,
    no: false,
  });
  assert.deepEqual(s.resource, { "service.name": "smg", "deployment.environment": "test" });
  assert.deepEqual(s.scope, { name: "smg", version: "0.1.0" });
  // Times to the microsecond (fixed64 nanoseconds from fractional ms).
  assert.ok(Math.abs(s.start - 1_800_000_000_000.25) < 0.001, String(s.start));
  assert.ok(Math.abs(s.end - 1_800_000_000_011.75) < 0.001, String(s.end));
  assert.equal(l.kind, 3);
  assert.equal(l.parentSpanId, server.spanId);
  assert.equal(l.traceId, s.traceId);
  assert.deepEqual(l.events.map((e) => [e.name, e.attributes]), [
    ["first_token", {}],
    ["usage", { "gen_ai.usage.output_tokens": 12 }],
  ]);
  assert.deepEqual(l.status, { code: 2, message: "worker answered 502" });
  assert.deepEqual(s.status, { code: 0, message: "" });
});

Deno.test("otlp: long and non-ASCII values, many spans: lengths past one and two bytes", () => {
  const out: Span[] = [];
  const tr = tracer(out);
  const long = "héllo ✓ 𝄞 ".repeat(3000); // ~40 KB: a three-byte length inside a span
  for (let i = 0; i < 300; i++) {
    const r = tr.request(`span ${i}`, null, null);
    r.server!.set("text", i === 7 ? long : `v${i}`).set("n", i);
    if (i === 8) r.server!.set("ascii", "x".repeat(20_000)); // a three-byte length, worked out first
    r.server!.finish();
  }
  const enc = new OtlpEncoder(ORIGIN);
  const spans = decodeSpans(enc.encode(out));
  assert.equal(spans.length, 300);
  assert.equal(spans[7].attributes.text, long);
  assert.equal(spans[8].attributes.ascii, "x".repeat(20_000));
  assert.equal(spans[299].attributes.n, 299);
  assert.equal(spans[299].parentSpanId, "");
  // The buffer is reused: a second batch encodes the same.
  assert.deepEqual(decodeSpans(enc.encode(out.slice(0, 2))).map((s) => s.name), [
    "span 0",
    "span 1",
  ]);
});
