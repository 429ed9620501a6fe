/**
 * Tracing through a real gateway (`--enable-trace`), its spans decoded with OpenTelemetry's own
 * definitions: a server span per inference request with HTTP and GenAI attributes; an attempt
 * (client) span per worker tried, a retried request's two, the failed one saying why; the
 * worker sent the attempt span's `traceparent` (HTTP header, gRPC metadata) so the engine's
 * spans join; a client's trace continued with its `tracestate`; an unsampled request recording
 * nothing and telling its worker so; PD's two legs; tracing off leaving the client's context
 * alone; OTLP over HTTP and gRPC to a receiver on loopback; a dead collector costing no request.
 */

import assert from "node:assert/strict";
import { qwen3 } from "../../support/qwen3.ts";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { type EnvReader, tracingSettings } from "../../lib/tracing/settings.ts";
import { transportFor } from "../../lib/tracing/transport.ts";
import type { Transport } from "../../lib/tracing/export.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { grpcSim } from "../support/grpc_sim.ts";
import { CapturingTransport, type DecodedSpan, OtlpReceiver } from "../support/otlp.ts";
import type { Overrides } from "../../support/gateway.ts";

const CLIENT_TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/** Settings with `--enable-trace` and `vars` as the environment. */
function settings(vars: Record<string, string> = {}, endpoint: string | null = null) {
  const env: EnvReader = (k) => vars[k];
  return tracingSettings({ enabled: true, endpoint }, env, "test")!;
}

/** A traced gateway over `urls` sending its batches to `transport`. */
function traced(
  urls: string[],
  transport: Transport,
  vars: Record<string, string> = {},
  o: Overrides = {},
): Promise<TestGateway> {
  return startGateway(urls, o, { tracing: { settings: settings(vars), transport } });
}

function chat(
  g: TestGateway,
  headers: Record<string, string> = {},
  stream = false,
  content = "hello",
) {
  return fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: "test-model",
      messages: [{ role: "user", content }],
      stream,
    }),
  });
}

/** The spans of the request, once its server span was exported. */
async function spansOf(g: TestGateway, t: CapturingTransport): Promise<DecodedSpan[]> {
  const done = t.until((s) => s.some((x) => x.kind === 2));
  await g.gw.tracing!.queue.flush();
  return await done;
}

const tp = (h: Headers | null) => h?.get("traceparent") ?? null;

Deno.test("tracing: a streamed request retried once — server span, two attempt spans, the worker's traceparent", async () => {
  const bad = new FakeWorker({ mode: { kind: "status", status: 503 } });
  const good = new FakeWorker({ chunks: 3 });
  const t = new CapturingTransport();
  const g = await traced([bad.url, good.url], t);
  try {
    const res = await chat(g, {}, true);
    assert.equal(res.status, 200);
    await res.text();
    const spans = await spansOf(g, t);
    const server = spans.find((s) => s.kind === 2)!;
    const legs = spans.filter((s) => s.kind === 3).sort((a, b) => a.start - b.start);
    assert.equal(server.name, "POST /v1/chat/completions");
    assert.equal(server.parentSpanId, "");
    assert.equal(server.attributes["http.request.method"], "POST");
    assert.equal(server.attributes["http.route"], "/v1/chat/completions");
    assert.equal(server.attributes["http.response.status_code"], 200);
    assert.equal(server.attributes["gen_ai.request.model"], "test-model");
    assert.equal(server.attributes["gen_ai.operation.name"], "chat");
    assert.equal(server.attributes["smg.stream"], true);
    assert.equal(server.attributes["smg.request_id"], res.headers.get("x-request-id"));
    assert.equal(server.resource["service.name"], "smg");
    assert.equal(legs.length, 2);
    for (const l of legs) {
      assert.equal(l.parentSpanId, server.spanId);
      assert.equal(l.traceId, server.traceId);
      assert.equal(l.name, "chat test-model");
      assert.equal(l.attributes["smg.route.policy"], "round_robin");
      assert.equal(l.attributes["server.address"], "127.0.0.1");
    }
    const [first, second] = legs;
    assert.equal(first.attributes["smg.worker.url"], bad.url);
    assert.equal(first.attributes["http.response.status_code"], 503);
    assert.equal(first.attributes["smg.retryable"], true);
    assert.equal(first.status.code, 2);
    assert.equal(second.attributes["smg.worker.url"], good.url);
    assert.equal(second.attributes["http.response.status_code"], 200);
    assert.equal(second.status.code, 0);
    assert.deepEqual(second.events.map((e) => e.name), ["first_token"]);
    // Each worker was sent its own attempt's span as the parent, sampled.
    assert.equal(tp(bad.seen.lastHeaders), `00-${server.traceId}-${first.spanId}-01`);
    assert.equal(tp(good.seen.lastHeaders), `00-${server.traceId}-${second.spanId}-01`);
    // The server span ends with the stream, after the attempt that served it.
    assert.ok(server.end >= second.end - 1 && server.start <= first.start);
    // The status page lists it among the slow requests, by its trace id.
    const snap = await (await fetch(g.metricsUrl.replace("/metrics", "/dashboard/snapshot")))
      .json();
    assert.equal(snap.slow_requests[0].trace_id, server.traceId);
    assert.equal(snap.slow_requests[0].request_id, res.headers.get("x-request-id"));
  } finally {
    await g.close();
    await bad.close();
    await good.close();
  }
});

Deno.test("tracing: a client's trace is continued, its tracestate passed on; a whole answer's usage recorded", async () => {
  const w = new FakeWorker({ usage: { prompt: 7, completion: 5 } });
  const t = new CapturingTransport();
  const g = await traced([w.url], t);
  try {
    const res = await chat(g, { traceparent: CLIENT_TP, tracestate: "vendor=abc" });
    assert.equal(res.status, 200);
    await res.text();
    const spans = await spansOf(g, t);
    const server = spans.find((s) => s.kind === 2)!;
    const leg = spans.find((s) => s.kind === 3)!;
    assert.equal(server.traceId, "0af7651916cd43dd8448eb211c80319c");
    assert.equal(server.parentSpanId, "b7ad6b7169203331");
    assert.equal(server.traceState, "vendor=abc");
    assert.equal(tp(w.seen.lastHeaders), `00-0af7651916cd43dd8448eb211c80319c-${leg.spanId}-01`);
    assert.equal(w.seen.lastHeaders?.get("tracestate"), "vendor=abc");
    assert.equal(leg.attributes["gen_ai.usage.input_tokens"], 7);
    assert.equal(leg.attributes["gen_ai.usage.output_tokens"], 5);
    assert.equal(server.attributes["gen_ai.usage.input_tokens"], 7);
  } finally {
    await g.close();
    await w.close();
  }
});

Deno.test("tracing: the attempt span carries cache_aware's decision — branch, matched prefix, prediction", async () => {
  const a = new FakeWorker();
  const b = new FakeWorker();
  const t = new CapturingTransport();
  const g = await traced([a.url, b.url], t, {}, { policy: "cache_aware" });
  try {
    // A prompt of many cache blocks, sent twice.
    const content = "a long shared system prompt, block after block. ".repeat(100);
    for (let i = 0; i < 2; i++) await (await chat(g, {}, false, content)).text();
    const legs = (await t.until((s) => s.filter((x) => x.kind === 2).length === 2))
      .filter((s) => s.kind === 3)
      .sort((x, y) => x.start - y.start);
    await g.gw.tracing!.queue.flush();
    const [first, second] = legs;
    assert.equal(first.attributes["smg.route.policy"], "cache_aware");
    assert.equal(first.attributes["smg.route.eligible_workers"], 2);
    assert.equal(first.attributes["smg.route.matched_prefix"], 0);
    // The repeat finds its whole text where the first went.
    assert.equal(second.attributes["smg.route.branch"], "hit");
    assert.ok((second.attributes["smg.route.matched_prefix"] as number) > 0);
    assert.ok((second.attributes["smg.route.predicted_cached_tokens"] as number) > 0);
    assert.equal(second.attributes["smg.worker.url"], first.attributes["smg.worker.url"]);
    assert.equal(typeof first.attributes["smg.route.branch"], "string");
  } finally {
    await g.close();
    await a.close();
    await b.close();
  }
});

Deno.test("tracing: an unsampled request records nothing and tells its worker (flag 00)", async () => {
  const w = new FakeWorker();
  const t = new CapturingTransport();
  const g = await traced([w.url], t, {
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "1",
  });
  try {
    // The client decided not to sample: followed, whatever the ratio.
    const res = await chat(g, { traceparent: CLIENT_TP.replace(/01$/, "00") });
    await res.text();
    await g.gw.tracing!.queue.flush();
    assert.equal(t.spans.length, 0);
    assert.match(tp(w.seen.lastHeaders)!, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$/);
    assert.notEqual(tp(w.seen.lastHeaders), CLIENT_TP.replace(/01$/, "00"));
  } finally {
    await g.close();
    await w.close();
  }
});

Deno.test("tracing: traceidratio samples the requests whose trace ids fall under the ratio", async () => {
  const w = new FakeWorker();
  const t = new CapturingTransport();
  const g = await traced([w.url], t, {
    OTEL_TRACES_SAMPLER: "traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.25",
  });
  try {
    // Trace ids whose random low 56 bits sit at i/40 of their range: 10 of 40 fall under 0.25.
    // The client's sampled flag is set on all of them; this sampler does not follow it.
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const low = (BigInt(i) * (1n << 56n)) / 40n + 1n;
      const id = "1".repeat(18) + low.toString(16).padStart(14, "0");
      ids.push(id);
      const res = await chat(g, { traceparent: `00-${id}-b7ad6b7169203331-01` });
      await res.text();
    }
    await g.gw.tracing!.queue.flush();
    const sampled = new Set(t.spans.filter((s) => s.kind === 2).map((s) => s.traceId));
    assert.deepEqual([...sampled].sort(), ids.slice(0, 10).sort());
  } finally {
    await g.close();
    await w.close();
  }
});

Deno.test("tracing: off, the client's traceparent reaches the worker as it came", async () => {
  const w = new FakeWorker();
  const g = await startGateway([w.url]);
  try {
    assert.equal(g.gw.tracing, null);
    const res = await chat(g, { traceparent: CLIENT_TP, tracestate: "a=b" });
    await res.text();
    assert.equal(tp(w.seen.lastHeaders), CLIENT_TP);
    assert.equal(w.seen.lastHeaders?.get("tracestate"), "a=b");
    const snap = await (await fetch(g.metricsUrl.replace("/metrics", "/dashboard/snapshot")))
      .json();
    assert.equal(snap.slow_requests, null);
  } finally {
    await g.close();
    await w.close();
  }
});

Deno.test("tracing: PD's two legs are two attempt spans under the request's", async () => {
  const prefill = new FakeWorker();
  const decode = new FakeWorker();
  const t = new CapturingTransport();
  const g = await traced([], t, {}, {
    pd: {
      enabled: true,
      prefill: [{ url: prefill.url, bootstrapPort: null }],
      decode: [decode.url],
      prefillPolicy: "round_robin",
      decodePolicy: "round_robin",
    },
  });
  try {
    await g.gw.whenReady(2);
    const res = await chat(g);
    assert.equal(res.status, 200);
    await res.text();
    const spans = await spansOf(g, t);
    const server = spans.find((s) => s.kind === 2)!;
    const legs = spans.filter((s) => s.kind === 3);
    assert.deepEqual(
      legs.map((l) => [l.attributes["smg.worker.type"], l.parentSpanId]).sort(),
      [["decode", server.spanId], ["prefill", server.spanId]],
    );
    const byType = (type: string) => legs.find((l) => l.attributes["smg.worker.type"] === type)!;
    assert.equal(
      tp(prefill.seen.lastHeaders),
      `00-${server.traceId}-${byType("prefill").spanId}-01`,
    );
    assert.equal(tp(decode.seen.lastHeaders), `00-${server.traceId}-${byType("decode").spanId}-01`);
  } finally {
    await g.close();
    await prefill.close();
    await decode.close();
  }
});

Deno.test("tracing: a gRPC worker gets the attempt's traceparent as metadata; tokenizing is a span", async () => {
  const sim = await grpcSim();
  const seen: string[] = [];
  sim.server.onGenerate = (_req, md) => seen.push(String(md.get("traceparent")[0] ?? ""));
  const t = new CapturingTransport();
  const g = await startGateway([sim.url], { modelPath: "qwen3" }, {
    grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) },
    tracing: { settings: settings(), transport: t },
  });
  try {
    const res = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "qwen3-sim", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    await res.text();
    const spans = await spansOf(g, t);
    const server = spans.find((s) => s.kind === 2)!;
    const leg = spans.find((s) => s.kind === 3)!;
    const tok = spans.find((s) => s.name === "smg.tokenize")!;
    assert.equal(tok.parentSpanId, server.spanId);
    assert.ok((tok.attributes["gen_ai.usage.input_tokens"] as number) > 0);
    assert.equal(leg.attributes["smg.worker.connection"], "grpc");
    assert.deepEqual(seen, [`00-${server.traceId}-${leg.spanId}-01`]);
  } finally {
    await g.close();
    await sim.close();
  }
});

Deno.test("tracing: OTLP over HTTP and over gRPC reaches a collector, headers included", async () => {
  const receiver = new OtlpReceiver();
  const urls = await receiver.start();
  const w = new FakeWorker();
  try {
    for (
      const [protocol, endpoint] of [["http/protobuf", urls.http], ["grpc", urls.grpc]] as const
    ) {
      const s = settings({
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_EXPORTER_OTLP_HEADERS: "x-tenant=team%20a",
      }, endpoint);
      const g = await startGateway([w.url], {}, { tracing: { settings: s } });
      const before = receiver.spans.length;
      try {
        const res = await chat(g);
        await res.text();
        const arrived = receiver.until(before + 2);
        await g.gw.tracing!.queue.flush();
        const spans = (await arrived).slice(before);
        assert.deepEqual(spans.map((x) => x.kind).sort(), [2, 3], protocol);
        assert.equal(receiver.lastHeaders["x-tenant"], "team a", protocol);
      } finally {
        await g.close();
      }
    }
  } finally {
    await receiver.close();
    await w.close();
  }
});

Deno.test("tracing: a dead collector costs no request; its drops are counted", async () => {
  const w = new FakeWorker();
  // A port nothing listens on: every export is refused.
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const s = settings({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" }, `127.0.0.1:${port}`);
  const sent = new CapturingTransport(transportFor(s));
  const g = await startGateway([w.url], {}, { tracing: { settings: s, transport: sent } });
  try {
    for (let i = 0; i < 20; i++) {
      const res = await chat(g);
      assert.equal(res.status, 200);
      await res.text();
    }
    // A batch handed to the refusing collector, and that export settled.
    const tried = sent.until((spans) => spans.length >= 2);
    await g.gw.tracing!.queue.flush();
    await tried;
    await g.gw.tracing!.queue.flush();
    const text = await (await fetch(g.metricsUrl)).text();
    const dropped = (reason: string) =>
      Number(
        new RegExp(`smg_trace_spans_dropped_total\\{reason="${reason}"\\} (\\d+)`).exec(text)?.[1],
      );
    assert.ok(dropped("export_failed") >= 2, text);
    assert.ok(dropped("export_failed") + dropped("collector_down") <= 40);
    assert.match(text, /smg_trace_spans_exported_total 0/);
  } finally {
    await g.close();
    await w.close();
  }
});
