/**
 * Spans as the gateway records them: small mutable records (name, kind, ids, times, attributes
 * as one flat key-value list, events, status) that cost a few allocations each and are encoded
 * only when a batch is exported (`otlp.ts`). A request's trace (`RequestTrace`) holds its server
 * span and makes its children; a request that is not sampled records nothing and only sends its
 * workers a `traceparent` with the sampled flag off, so their engines do not trace it either.
 */

import {
  formatTraceparent,
  newSpanId,
  newTraceId,
  parseTraceparent,
  type SpanContext,
} from "./context.ts";
import type { Sampler } from "./sampler.ts";

/** OpenTelemetry's span kinds (the numbers of its protocol). */
export const SpanKind = { internal: 1, server: 2, client: 3 } as const;

/** A span kind's number. */
export type SpanKindValue = typeof SpanKind[keyof typeof SpanKind];

/** An attribute's value. */
export type AttrValue = string | number | boolean;

/** Attributes as one flat list: key, value, key, value… */
export type Attrs = (string | AttrValue)[];

/** A point in a span's time with attributes of its own. */
export interface SpanEvent {
  /** Its name. */
  readonly name: string;
  /** Wall-clock time, ms since the epoch (fractional). */
  readonly time: number;
  /** Its attributes (flat key-value list), or null. */
  readonly attrs: Attrs | null;
}

/** Where ended spans go (the exporter's queue). */
export interface SpanSink {
  /** Takes an ended span; never throws, never blocks (a full queue drops and counts). */
  push(span: Span): void;
}

/** One span. */
export class Span {
  /** The trace's id (32 hex digits). */
  readonly traceId: string;
  /** This span's id (16 hex digits). */
  readonly spanId: string;
  /** The parent span's id, or null for a trace's root. */
  readonly parentId: string | null;
  /** Whether the parent is another process's (a client's `traceparent`). */
  readonly remoteParent: boolean;
  /** The `tracestate` in force, or null. */
  readonly traceState: string | null;
  /** Its name. */
  name: string;
  /** Its kind (`SpanKind`). */
  readonly kind: SpanKindValue;
  /** Start, ms since the epoch. */
  readonly start: number;
  /** End, ms since the epoch (0 while open). */
  end = 0;
  /** Attributes: key, value, key, value… */
  readonly attrs: Attrs = [];
  /** Events, or null. */
  events: SpanEvent[] | null = null;
  /** Attributes encoded before (`attributeBlock` in `otlp.ts`), or null. */
  blocks: Uint8Array[] | null = null;
  /** Status: 0 unset, 1 ok, 2 error (the protocol's numbers). */
  status: 0 | 1 | 2 = 0;
  /** The error status's message, or null. */
  message: string | null = null;
  readonly #tracer: Tracer;
  /** The trace's root (null: this is one), and the root's children waiting for it to end. */
  #root: Span | null = null;
  #children: Span[] | null = null;

  constructor(
    tracer: Tracer,
    name: string,
    kind: SpanKindValue,
    traceId: string,
    parentId: string | null,
    remoteParent: boolean,
    traceState: string | null,
    start: number,
  ) {
    this.#tracer = tracer;
    this.name = name;
    this.kind = kind;
    this.traceId = traceId;
    this.spanId = newSpanId();
    this.parentId = parentId;
    this.remoteParent = remoteParent;
    this.traceState = traceState;
    this.start = start;
  }

  /** Sets an attribute (a null or undefined value is left out). */
  set(key: string, value: AttrValue | null | undefined): this {
    if (value !== null && value !== undefined) this.attrs.push(key, value);
    return this;
  }

  /** Sets an attribute, replacing its earlier value (null or undefined: left as it is). */
  put(key: string, value: AttrValue | null | undefined): this {
    if (value === null || value === undefined) return this;
    const a = this.attrs;
    for (let i = 0; i < a.length; i += 2) {
      if (a[i] === key) {
        a[i + 1] = value;
        return this;
      }
    }
    a.push(key, value);
    return this;
  }

  /** Adds attributes encoded before (`attributeBlock`): a route's or a worker's, made once. */
  block(bytes: Uint8Array): this {
    (this.blocks ??= []).push(bytes);
    return this;
  }

  /** Adds an event at `time` (default now). */
  event(name: string, attrs: Attrs | null = null, time = this.#tracer.now()): this {
    (this.events ??= []).push({ name, time, attrs });
    return this;
  }

  /** Marks the span failed with `message`. */
  fail(message: string): this {
    this.status = 2;
    this.message = message;
    return this;
  }

  /** A child of this span, started now; it leaves with its trace's root (see `finish`). */
  child(name: string, kind: SpanKindValue = SpanKind.internal): Span {
    const c = new Span(
      this.#tracer,
      name,
      kind,
      this.traceId,
      this.spanId,
      false,
      this.traceState,
      this.#tracer.now(),
    );
    const root = this.#root ?? this;
    c.#root = root;
    if (root.end === 0) (root.#children ??= []).push(c);
    return c;
  }

  /** The `traceparent` naming this span as the parent (sampled). */
  traceparent(): string {
    return formatTraceparent(this.traceId, this.spanId, true);
  }

  /**
   * Ends the span now (or at `time`); later calls do nothing. A trace's spans leave for the
   * exporter together, when its root ends: what is said of a child after it ended (why an attempt
   * failed, known once its slot is released) still reaches it. A child still open then leaves
   * when it ends.
   */
  finish(time = this.#tracer.now()): void {
    if (this.end !== 0) return;
    this.end = Math.max(time, this.start);
    const root = this.#root;
    if (root !== null) {
      if (root.end !== 0) this.#tracer.sink.push(this);
      return;
    }
    const sink = this.#tracer.sink;
    sink.push(this);
    const children = this.#children;
    this.#children = null;
    if (children !== null) { for (const c of children) if (c.end !== 0) sink.push(c); }
  }
}

/**
 * `work` timed by `span` (none: just awaited): the span ends when it settles, failed if it
 * rejects; `onValue` adds what the value tells first.
 */
export async function timed<T>(
  span: Span | null | undefined,
  work: Promise<T>,
  onValue?: (span: Span, value: T) => void,
): Promise<T> {
  if (!span) return await work;
  try {
    const v = await work;
    onValue?.(span, v);
    return v;
  } catch (e) {
    span.fail(String((e as Error)?.message ?? e));
    throw e;
  } finally {
    span.finish();
  }
}

/** What a tracer is built from. */
export interface TracerOptions {
  /** Who is traced. */
  sampler: Sampler;
  /** Where ended spans go. */
  sink: SpanSink;
  /** Wall-clock ms since the epoch (default: the time origin plus `performance.now()`). */
  now?: () => number;
}

const origin = performance.timeOrigin;

/** Starts requests' traces. */
export class Tracer {
  readonly sampler: Sampler;
  readonly sink: SpanSink;
  readonly now: () => number;

  constructor(o: TracerOptions) {
    this.sampler = o.sampler;
    this.sink = o.sink;
    this.now = o.now ?? (() => origin + performance.now());
  }

  /**
   * The trace of a request that brought `traceparent` and `tracestate` (or not): the client's
   * trace continued, else a new one; its server span named `name`, recorded when sampled.
   */
  request(name: string, traceparent: string | null, tracestate: string | null): RequestTrace {
    const parent = parseTraceparent(traceparent, tracestate);
    const traceId = parent?.traceId ?? newTraceId();
    if (!this.sampler(traceId, parent === null ? null : parent.sampled)) {
      return new RequestTrace(traceId, null, parent);
    }
    const server = new Span(
      this,
      name,
      SpanKind.server,
      traceId,
      parent?.spanId ?? null,
      parent !== null,
      parent?.traceState ?? null,
      this.now(),
    );
    return new RequestTrace(traceId, server, parent);
  }
}

/** One request's trace: its server span when sampled, and the context its workers are sent. */
export class RequestTrace {
  /** The trace id (logged with the request, sent to workers). */
  readonly traceId: string;
  /** The server span, or null when the request is not sampled (nothing is recorded). */
  readonly server: Span | null;
  readonly #parent: SpanContext | null;

  constructor(traceId: string, server: Span | null, parent: SpanContext | null) {
    this.traceId = traceId;
    this.server = server;
    this.#parent = parent;
  }

  /** A child of the server span (null when not sampled). */
  child(name: string, kind: SpanKindValue = SpanKind.internal): Span | null {
    return this.server?.child(name, kind) ?? null;
  }

  /**
   * The `traceparent` for a worker: `span`'s when recorded, else this trace's id with a fresh span
   * id and the sampled flag off (an engine that follows its parent does not trace it either).
   */
  traceparent(span: Span | null): string {
    return span ? span.traceparent() : formatTraceparent(this.traceId, newSpanId(), false);
  }

  /** The `tracestate` that came with the client's `traceparent`, passed on to workers. */
  get traceState(): string | null {
    return this.#parent?.traceState ?? null;
  }
}
