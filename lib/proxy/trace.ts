/**
 * What the request path writes into a request's trace (`--enable-trace`), by OpenTelemetry's
 * semantic conventions where they apply (HTTP, GenAI) and `smg.*` names for the routing:
 * - each attempt on a worker is a CLIENT span named `{operation} {model}` (GenAI's client span;
 *   PD's two legs are one each), opened when the worker is picked and charged, ended when its
 *   slot is released, carrying the routing decision (policy, branch, matched prefix, predicted
 *   cached tokens, eligible workers, prefill tokens), the worker, what it answered, its first
 *   token (an event) and the usage it reported; its `traceparent` is what the worker is sent, so
 *   the engine's spans are its children;
 * - a failed attempt's span says why, and whether the request was retried.
 * A request that is not sampled records nothing; its workers get a `traceparent` with the sampled
 * flag off. With tracing off, nothing here runs and the client's own `traceparent` passes through.
 */

import type { Endpoint } from "../core/types.ts";
import type { RequestTrace, Span } from "../tracing/span.ts";
import { SpanKind } from "../tracing/span.ts";
import type { Worker } from "../workers/worker.ts";
import type { CallContext, Failure, LegTrace } from "./types.ts";

/** GenAI's `gen_ai.operation.name` of each endpoint. */
const OPERATION: Readonly<Record<Endpoint, string>> = {
  chat: "chat",
  completions: "text_completion",
  generate: "generate",
  embeddings: "embeddings",
  rerank: "rerank",
};

/** The operation name of `endpoint` (GenAI's `gen_ai.operation.name`). */
export const operationOf = (endpoint: Endpoint): string => OPERATION[endpoint];

/** Opens the span of an attempt of `c` on `worker`, just picked; its context for the worker. */
export function openLeg(c: CallContext, trace: RequestTrace, worker: Worker): LegTrace {
  const span = trace.child(
    `${OPERATION[c.rr.endpoint]} ${c.rr.model ?? "default"}`,
    SpanKind.client,
  );
  if (span !== null) {
    const note = c.notes.get(worker.id);
    const u = worker.url;
    const colon = u.lastIndexOf(":");
    span
      .set("gen_ai.operation.name", OPERATION[c.rr.endpoint])
      .set("gen_ai.request.model", c.rr.model)
      .set("server.address", hostOf(u))
      .set(
        "server.port",
        colon > 0 ? Number(u.slice(colon + 1).replace(/\D.*$/, "")) || null : null,
      )
      .set("smg.worker.url", worker.url)
      .set("smg.worker.type", worker.type)
      .set("smg.worker.connection", worker.connection)
      .set("smg.continuation", c.continuing || null);
    if (note) {
      span
        .set("smg.route.policy", note.policy)
        .set("smg.route.branch", note.branch)
        .set("smg.route.eligible_workers", note.eligible)
        .set("smg.route.matched_prefix", note.matched)
        .set("smg.route.predicted_cached_tokens", note.predictedCached)
        .set("smg.route.prefill_tokens", note.prefillTokens);
    }
    (c.spans ??= new Map()).set(worker.id, span);
  }
  return { span, traceparent: trace.traceparent(span), tracestate: trace.traceState };
}

/** The trace context as gRPC metadata (`traceparent`, `tracestate`); none with tracing off. */
export function traceMetadata(t: LegTrace | null): [string, string][] | undefined {
  if (t === null) return undefined;
  return t.tracestate === null
    ? [["traceparent", t.traceparent]]
    : [["traceparent", t.traceparent], ["tracestate", t.tracestate]];
}

/** The host of a worker URL (`http://h:p`, `grpc://[::1]:p`). */
function hostOf(url: string): string {
  const start = url.indexOf("//") + 2;
  let end = url.indexOf("/", start);
  if (end < 0) end = url.length;
  const hostPort = url.slice(start, end);
  if (hostPort.startsWith("[")) return hostPort.slice(1, hostPort.indexOf("]"));
  const colon = hostPort.lastIndexOf(":");
  return colon < 0 ? hostPort : hostPort.slice(0, colon);
}

/** The span of `c`'s attempt on `worker`, if recorded. */
export const legSpan = (c: CallContext, worker: Worker): Span | undefined =>
  c.spans?.get(worker.id);

/** Marks an attempt's span failed: why, and whether another worker may be tried. */
export function failedLeg(span: Span | undefined, f: Failure): void {
  if (!span) return;
  const status = f.worker?.status ?? f.error?.status;
  span
    .set("http.response.status_code", status)
    .set("error.type", f.error?.code ?? (status !== undefined ? String(status) : "error"))
    .set("smg.retryable", f.retryable)
    .fail(f.error?.message ?? `worker answered ${status}`);
}

/** The usage a worker reported, on the attempt's span and the request's server span. */
export function usageOnSpans(
  c: CallContext,
  span: Span | undefined,
  u: { prompt: number; cached: number | null; completion?: number | null },
): void {
  for (const s of [span, c.ctx.trace?.server]) {
    s?.put("gen_ai.usage.input_tokens", u.prompt)
      .put("gen_ai.usage.cache_read.input_tokens", u.cached)
      .put("gen_ai.usage.output_tokens", u.completion);
  }
}
