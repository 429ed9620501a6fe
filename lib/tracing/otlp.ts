/**
 * Spans as OTLP's protobuf bytes: one `ExportTraceServiceRequest` (opentelemetry-proto,
 * `collector/trace/v1`) holding one resource's spans under one instrumentation scope, written
 * straight into a buffer (`proto_writer.ts`), no message objects.
 * Field numbers are the protocol's (`trace/v1/trace.proto`, `common/v1/common.proto`,
 * `resource/v1/resource.proto`); the tests decode the bytes with OpenTelemetry's own definitions.
 */

import type { Attrs, Span } from "./span.ts";
import { putVarint, varintBytes, Writer } from "./proto_writer.ts";

/**
 * `KeyValue.key` (field 1) of each attribute name, encoded once: the names are the code's own
 * constants. Bounded should a caller ever pass names it makes up.
 */
const KEY_FIELDS = new Map<string, Uint8Array>();
const MAX_KEY_FIELDS = 1024;

function keyField(k: string): Uint8Array {
  let f = KEY_FIELDS.get(k);
  if (f === undefined) {
    const w = new Writer();
    w.string(1, k);
    f = w.buf.slice(0, w.pos);
    if (KEY_FIELDS.size < MAX_KEY_FIELDS) KEY_FIELDS.set(k, f);
  }
  return f;
}

/**
 * `KeyValue` fields of `attrs` at `field`. The common cases (an ASCII string, a non-negative
 * integer, a boolean) are written in one pass with their lengths worked out first (a string's is
 * its length while it is ASCII: met a wider character, the attribute is written again through the
 * writer's nested fields, as are negative and fractional numbers).
 */
function attributes(w: Writer, field: number, attrs: Attrs): void {
  const tag = (field << 3) | 2;
  for (let i = 0; i + 1 < attrs.length; i += 2) {
    const key = keyField(attrs[i] as string);
    const v = attrs[i + 1];
    let any: number; // AnyValue's length
    if (typeof v === "string") any = 1 + varintBytes(v.length) + v.length;
    else if (typeof v === "boolean") any = 2;
    else if (Number.isSafeInteger(v) && v >= 0) any = 1 + varintBytes(v);
    else {
      nestedAttribute(w, field, key, v);
      continue;
    }
    const kv = key.length + 1 + varintBytes(any) + any;
    w.ensure(kv + 12);
    const b = w.buf;
    const start = w.pos;
    let p = start;
    b[p++] = tag;
    p = putVarint(b, p, kv);
    for (let k = 0; k < key.length; k++) b[p++] = key[k];
    b[p++] = (2 << 3) | 2; // KeyValue.value
    p = putVarint(b, p, any);
    if (typeof v === "string") {
      b[p++] = (1 << 3) | 2; // AnyValue.string_value
      p = putVarint(b, p, v.length);
      let wide = false;
      for (let c = 0; c < v.length; c++) {
        const code = v.charCodeAt(c);
        if (code >= 0x80) {
          wide = true;
          break;
        }
        b[p++] = code;
      }
      if (wide) {
        w.pos = start;
        nestedAttribute(w, field, key, v);
        continue;
      }
    } else if (typeof v === "boolean") {
      b[p++] = (2 << 3) | 0; // AnyValue.bool_value
      b[p++] = v ? 1 : 0;
    } else {
      b[p++] = (3 << 3) | 0; // AnyValue.int_value
      p = putVarint(b, p, v);
    }
    w.pos = p;
  }
}

/** One `KeyValue` through nested fields: non-ASCII text, a negative or fractional number. */
function nestedAttribute(w: Writer, field: number, key: Uint8Array, v: string | number): void {
  const kv = w.open(field);
  w.raw(key);
  const any = w.open(2);
  if (typeof v === "string") w.string(1, v);
  else if (Number.isSafeInteger(v)) {
    w.tag(3, 0);
    w.int64(v);
  } else {
    w.tag(4, 1);
    w.double(v);
  }
  w.close(any);
  w.close(kv);
}

/** Ms since the epoch as ns (fixed64). */
const nanos = (ms: number): number => {
  const whole = Math.floor(ms);
  return whole * 1e6 + Math.round((ms - whole) * 1e6);
};

/** Flags of a span (field 16): the sampled trace flag, and whether the parent is remote. */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

function span(w: Writer, s: Span): void {
  const m = w.open(2);
  w.hex(1, s.traceId);
  w.hex(2, s.spanId);
  if (s.traceState !== null) w.string(3, s.traceState);
  if (s.parentId !== null) w.hex(4, s.parentId);
  w.string(5, s.name);
  w.tag(6, 0);
  w.varint(s.kind);
  w.tag(7, 1);
  w.fixed64(nanos(s.start));
  w.tag(8, 1);
  w.fixed64(nanos(s.end));
  attributes(w, 9, s.attrs);
  if (s.blocks !== null) { for (const b of s.blocks) w.raw(b); }
  if (s.events !== null) {
    for (const e of s.events) {
      const ev = w.open(11);
      w.tag(1, 1);
      w.fixed64(nanos(e.time));
      w.string(2, e.name);
      if (e.attrs !== null) attributes(w, 3, e.attrs);
      w.close(ev);
    }
  }
  if (s.status !== 0) {
    const st = w.open(15);
    if (s.message !== null) w.string(2, s.message);
    w.tag(3, 0);
    w.varint(s.status);
    w.close(st);
  }
  const flags = 1 | HAS_IS_REMOTE | (s.remoteParent ? IS_REMOTE : 0);
  w.tag(16, 5);
  w.ensure(4);
  w.buf[w.pos++] = flags & 0xff;
  w.buf[w.pos++] = (flags >>> 8) & 0xff;
  w.buf[w.pos++] = 0;
  w.buf[w.pos++] = 0;
  w.close(m);
}

/**
 * Span attributes encoded once (`Span.block`): what is the same for every request of a route or
 * every attempt on a worker.
 */
export function attributeBlock(attrs: Attrs): Uint8Array {
  const w = new Writer();
  attributes(w, 9, attrs);
  return w.buf.slice(0, w.pos);
}

/** Who the spans are from: the resource's attributes and the instrumentation scope. */
export interface Origin {
  /** Resource attributes (`service.name` first), flat key-value list. */
  resource: Attrs;
  /** The instrumentation scope's name and version. */
  scope: { name: string; version: string };
}

/**
 * Builds `ExportTraceServiceRequest`s span by span: each span is written as it ends (`add`), so
 * the span object can die young instead of waiting in a queue for the next export (which would
 * promote it, and its attributes, to the old generation); `seal` wraps the spans written so far
 * in the resource and scope, in one new buffer, and starts the next batch.
 */
export class OtlpEncoder {
  /** The batch being built: its spans after room for the envelope (`#head` bytes). */
  #spans: Writer;
  /** The resource (`ResourceSpans.resource`) and scope (`ScopeSpans.scope`) fields, encoded once. */
  readonly #resource: Uint8Array;
  readonly #scope: Uint8Array;
  /** Room kept before the spans for the envelope: its fields and three lengths of 5 bytes. */
  readonly #head: number;
  #count = 0;

  constructor(origin: Origin) {
    const w = new Writer();
    const res = w.open(1);
    attributes(w, 1, origin.resource);
    w.close(res);
    this.#resource = w.buf.slice(0, w.pos);
    w.reset();
    const scope = w.open(1);
    w.string(1, origin.scope.name);
    w.string(2, origin.scope.version);
    w.close(scope);
    this.#scope = w.buf.slice(0, w.pos);
    this.#head = this.#resource.length + this.#scope.length + 2 + 2 * 5;
    this.#spans = this.#batch(64 * 1024);
  }

  /** A fresh batch's writer, `size` bytes, positioned after the envelope's room. */
  #batch(size: number): Writer {
    const w = new Writer(Math.max(size, this.#head + 1024));
    w.pos = this.#head;
    return w;
  }

  /** Spans written since the last `seal`. */
  get count(): number {
    return this.#count;
  }

  /** Writes `s` into the batch being built. */
  add(s: Span): void {
    span(this.#spans, s);
    this.#count++;
  }

  /**
   * The request holding the spans written since the last seal (then none are): the envelope is
   * written into the room kept before them, and the batch's buffer handed over as it is (the next
   * batch gets a buffer of its own, as large as this one was).
   */
  seal(): Uint8Array<ArrayBuffer> {
    const w = this.#spans;
    const spansLength = w.pos - this.#head;
    const scopeSpans = this.#scope.length + spansLength;
    const resourceSpans = this.#resource.length + 1 + varintBytes(scopeSpans) + scopeSpans;
    const total = 1 + varintBytes(resourceSpans) + resourceSpans;
    const b = w.buf;
    const start = w.pos - total;
    let p = start;
    b[p++] = (1 << 3) | 2; // ExportTraceServiceRequest.resource_spans
    p = putVarint(b, p, resourceSpans);
    b.set(this.#resource, p);
    p += this.#resource.length;
    b[p++] = (2 << 3) | 2; // ResourceSpans.scope_spans
    p = putVarint(b, p, scopeSpans);
    b.set(this.#scope, p);
    const out = b.subarray(start, w.pos);
    this.#spans = this.#batch(b.length);
    this.#count = 0;
    return out;
  }

  /** `spans` as one request (tests; the queue adds them one by one). */
  encode(spans: readonly Span[]): Uint8Array<ArrayBuffer> {
    for (const s of spans) this.add(s);
    return this.seal();
  }
}
