/**
 * What the request path writes into a request's trace (`--enable-trace`), by OpenTelemetry's
 * semantic conventions where they apply (HTTP, GenAI) and `smg.*` names for the routing:
 * - each attempt on a worker is a CLIENT span named `{operation} {model}` (GenAI's client span;
 *   PD's two legs are one each), opened when the worker is picked and charged, ended when its
 *   slot is released, carrying the routing decision (policy, branch, matched prefix, predicted
 *   cached tokens, eligible workers, prefill tokens), the worker, what it answered, its first
 *   token (an event) and the usage it reported; its `traceparent` is what the worker is sent, so
 *   the engine's spans are its children;
 * - a failed attempt's span says why, and whether the request was retried;
 * - on the server span: what the request asks (operation, model, stream), the tenant limits'
 *   decision (an event), and tokenizing as a child span (`smg.tokenize`).
 * A request that is not sampled records nothing; its workers get a `traceparent` with the sampled
 * flag off. With tracing off, nothing here runs and the client's own `traceparent` passes through.
 */

import type { Endpoint, RouteRequest } from "../core/types.ts";
import type { Attrs, RequestTrace, Span } from "../tracing/span.ts";
import { attributeBlock } from "../tracing/otlp.ts";
import { SpanKind, timed } from "../tracing/span.ts";
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

/** Opens the span of an attempt of `c` on `worker`, just picked; its context for the worker. */
export function openLeg(c: CallContext, trace: RequestTrace, worker: Worker): LegTrace {
  const span = trace.server === null
    ? null
    : trace.child(`${OPERATION[c.rr.endpoint]} ${c.rr.model ?? "default"}`, SpanKind.client);
  if (span !== null) {
    const note = c.notes.get(worker.id);
    span
      .block(workerBlock(worker))
      .set("gen_ai.operation.name", OPERATION[c.rr.endpoint])
      .set("gen_ai.request.model", c.rr.model)
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

/** What the request asks, on its server span (GenAI's operation and model; a stream or not). */
export function requestOnSpan(server: Span, rr: RouteRequest): void {
  server.set("gen_ai.operation.name", OPERATION[rr.endpoint])
    .set("gen_ai.request.model", rr.model)
    .set("smg.stream", rr.stream);
}

/** The tenant limits' decision on a request (`estimate` prompt tokens), as a server span event. */
export function tenantLimitOnSpan(
  server: Span | null | undefined,
  allowed: boolean,
  estimate: number,
) {
  server?.event("smg.tenant_limit", [
    "smg.tenant_limit.decision",
    allowed ? "allowed" : "denied",
    "smg.tenant_limit.tokens",
    estimate,
  ]);
}

/** `work` (a prompt being tokenized) as the `smg.tokenize` span of `server`, with its token count. */
export function tokenizing<T extends { ids: readonly number[] }>(
  server: Span | null,
  work: Promise<T>,
): Promise<T> {
  return timed(
    server?.child("smg.tokenize"),
    work,
    (s, v) => s.set("gen_ai.usage.input_tokens", v.ids.length),
  );
}

/** The trace context as gRPC metadata (`traceparent`, `tracestate`); none with tracing off. */
export function traceMetadata(t: LegTrace | null): [string, string][] | undefined {
  if (t === null) return undefined;
  return t.tracestate === null
    ? [["traceparent", t.traceparent]]
    : [["traceparent", t.traceparent], ["tracestate", t.tracestate]];
}

/** Each worker's own attributes, encoded once (its address, URL, type and connection). */
const WORKER_BLOCKS = new WeakMap<Worker, Uint8Array>();

function workerBlock(worker: Worker): Uint8Array {
  let b = WORKER_BLOCKS.get(worker);
  if (b === undefined) {
    const a = addressOf(worker.url);
    const attrs: Attrs = ["server.address", a.host];
    if (a.port !== null) attrs.push("server.port", a.port);
    attrs.push(
      "smg.worker.url",
      worker.url,
      "smg.worker.type",
      worker.type,
      "smg.worker.connection",
      worker.connection,
    );
    WORKER_BLOCKS.set(worker, b = attributeBlock(attrs));
  }
  return b;
}

/** A worker URL's host and port (`http://h:p`, `grpc://[::1]:p`, `http://h:p@rank`). */
export interface Address {
  host: string;
  port: number | null;
}

/** Each worker URL's address, parsed once (URLs are few; the map is bounded all the same). */
const ADDRESSES = new Map<string, Address>();

export function addressOf(url: string): Address {
  let a = ADDRESSES.get(url);
  if (a !== undefined) return a;
  const start = url.indexOf("//") + 2;
  let end = start;
  while (end < url.length && url[end] !== "/" && url[end] !== "@") end++;
  const hostPort = url.slice(start, end);
  const bracket = hostPort.startsWith("[") ? hostPort.indexOf("]") : -1;
  const colon = hostPort.lastIndexOf(":");
  const hasPort = colon > bracket;
  a = {
    host: bracket >= 0 ? hostPort.slice(1, bracket) : hasPort ? hostPort.slice(0, colon) : hostPort,
    port: hasPort ? Number(hostPort.slice(colon + 1)) || null : null,
  };
  if (ADDRESSES.size >= 4096) ADDRESSES.clear();
  ADDRESSES.set(url, a);
  return a;
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
