/**
 * W3C trace context: a client's `traceparent` read (and what the spec says to ignore), the one
 * sent to workers written, `tracestate` passed on only when well formed, ids never zero; the
 * samplers by their OTEL names, the ratio decided on the trace id alone and honoured in share.
 */

import assert from "node:assert/strict";
import {
  formatTraceparent,
  newSpanId,
  newTraceId,
  parseTraceparent,
} from "../../lib/tracing/context.ts";
import { sampler, underRatio } from "../../lib/tracing/sampler.ts";

const TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

Deno.test("traceparent: version 00 read; sampled flag; tracestate kept", () => {
  const c = parseTraceparent(TP, "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7");
  assert.deepEqual(c, {
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    sampled: true,
    traceState: "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7",
  });
  assert.equal(parseTraceparent(TP.replace(/01$/, "00"), null)?.sampled, false);
  assert.equal(parseTraceparent(TP.replace(/01$/, "03"), null)?.sampled, true);
});

Deno.test("traceparent: what the spec says to ignore is ignored", () => {
  for (
    const bad of [
      "",
      "garbage",
      TP.toUpperCase(),
      TP.replace("0af7651916cd43dd8448eb211c80319c", "0".repeat(32)),
      TP.replace("b7ad6b7169203331", "0".repeat(16)),
      "ff" + TP.slice(2),
      TP + "-extra", // version 00 has exactly four fields
      TP.slice(0, -1),
    ]
  ) assert.equal(parseTraceparent(bad, null), null, bad);
  // A later version may add fields after the four it shares with 00.
  assert.equal(
    parseTraceparent("01" + TP.slice(2) + "-what-ever", null)?.spanId,
    "b7ad6b7169203331",
  );
  assert.equal(parseTraceparent(null, "a=b"), null);
});

Deno.test("tracestate: passed on only when well formed and within bounds", () => {
  const state = (s: string) => parseTraceparent(TP, s)?.traceState;
  assert.equal(state("a=1"), "a=1");
  assert.equal(state("  "), null);
  assert.equal(state("novalue"), null);
  assert.equal(state("=x"), null);
  assert.equal(state(Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(",")) !== null, true);
  assert.equal(state(Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",")), null);
  assert.equal(state(`a=${"x".repeat(600)}`), null);
});

Deno.test("ids: lower-case hex of the right length, never all zero, and distinct", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const t = newTraceId();
    const s = newSpanId();
    assert.match(t, /^[0-9a-f]{32}$/);
    assert.match(s, /^[0-9a-f]{16}$/);
    assert.notEqual(t, "0".repeat(32));
    seen.add(s);
  }
  assert.equal(seen.size, 2000);
  assert.equal(
    formatTraceparent("a".repeat(32), "b".repeat(16), false),
    `00-${"a".repeat(32)}-${"b".repeat(16)}-00`,
  );
  assert.equal(
    parseTraceparent(formatTraceparent(newTraceId(), newSpanId(), true), null)?.sampled,
    true,
  );
});

Deno.test("samplers: on, off, and parent-based ones follow the client's flag", () => {
  const id = newTraceId();
  assert.equal(sampler("always_on", 1)(id, false), true);
  assert.equal(sampler("always_off", 1)(id, true), false);
  assert.equal(sampler("parentbased_always_on", 1)(id, false), false);
  assert.equal(sampler("parentbased_always_on", 1)(id, null), true);
  assert.equal(sampler("parentbased_always_off", 1)(id, true), true);
  assert.equal(sampler("parentbased_always_off", 1)(id, null), false);
  assert.equal(sampler("parentbased_traceidratio", 0)(id, true), true);
  assert.equal(sampler("traceidratio", 0)(id, true), false);
});

Deno.test("traceidratio: the share asked for, decided on the id alone (alike everywhere)", () => {
  const ids = Array.from({ length: 20_000 }, newTraceId);
  for (const ratio of [0.01, 0.1, 0.5]) {
    const s = sampler("parentbased_traceidratio", ratio);
    const share = ids.filter((id) => s(id, null)).length / ids.length;
    assert.ok(Math.abs(share - ratio) < Math.max(0.005, ratio * 0.1), `${ratio}: ${share}`);
    // The same id always gets the same answer, and a lower ratio samples a subset.
    for (const id of ids.slice(0, 500)) {
      assert.equal(s(id, null), underRatio(id, ratio));
      if (underRatio(id, ratio / 2)) assert.ok(underRatio(id, ratio));
    }
  }
  // The low 56 bits decide: the top of the range is never under a ratio below 1.
  assert.equal(underRatio("0".repeat(18) + "f".repeat(14), 0.999), false);
  assert.equal(underRatio("f".repeat(18) + "0".repeat(14), 0.001), true);
});
