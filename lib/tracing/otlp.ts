/**
 * Spans as OTLP's protobuf bytes: one `ExportTraceServiceRequest` (opentelemetry-proto,
 * `collector/trace/v1`) holding one resource's spans under one instrumentation scope. Written
 * straight into a reused buffer, no message objects: a nested message's length is written after
 * its content, the content moved right when the length needs more than the byte reserved for it.
 * Field numbers are the protocol's (`trace/v1/trace.proto`, `common/v1/common.proto`,
 * `resource/v1/resource.proto`); the tests decode the bytes with OpenTelemetry's own definitions.
 */

import type { Attrs, Span } from "./span.ts";

const encoder = new TextEncoder();

/** A growing protobuf writer. */
class Writer {
  buf: Uint8Array<ArrayBuffer>;
  pos = 0;

  constructor(size = 1024) {
    this.buf = new Uint8Array(size);
  }

  reset(): void {
    this.pos = 0;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b;
  }

  varint(v: number): void {
    this.ensure(10);
    const b = this.buf;
    while (v >= 0x80) {
      b[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    b[this.pos++] = v;
  }

  /** A 64-bit signed integer as a varint (negative: ten bytes, two's complement). */
  int64(v: number): void {
    if (v >= 0) return this.varint(v);
    // Two's complement over 64 bits, in two 32-bit halves.
    const hi = Math.floor(v / 2 ** 32);
    const lo = v - hi * 2 ** 32;
    let h = (hi + 2 ** 32) >>> 0;
    let l = lo >>> 0;
    this.ensure(10);
    for (let i = 0; i < 9; i++) {
      this.buf[this.pos++] = (l & 0x7f) | 0x80;
      l = (l >>> 7) | ((h & 0x7f) << 25);
      h >>>= 7;
    }
    this.buf[this.pos++] = l & 1;
  }

  fixed64(v: number): void {
    this.ensure(8);
    const hi = Math.floor(v / 2 ** 32);
    const lo = v - hi * 2 ** 32;
    const b = this.buf;
    const p = this.pos;
    b[p] = lo & 0xff;
    b[p + 1] = (lo >>> 8) & 0xff;
    b[p + 2] = (lo >>> 16) & 0xff;
    b[p + 3] = (lo >>> 24) & 0xff;
    b[p + 4] = hi & 0xff;
    b[p + 5] = (hi >>> 8) & 0xff;
    b[p + 6] = (hi >>> 16) & 0xff;
    b[p + 7] = (hi >>> 24) & 0xff;
    this.pos = p + 8;
  }

  double(v: number): void {
    this.ensure(8);
    new DataView(this.buf.buffer, this.pos, 8).setFloat64(0, v, true);
    this.pos += 8;
  }

  /** Starts a length-delimited field: returns where its content begins (one byte reserved). */
  open(field: number): number {
    this.varint((field << 3) | 2);
    this.ensure(1);
    this.pos++;
    return this.pos;
  }

  /** Ends the field opened at `start`: writes its length, moving the content if needed. */
  close(start: number): void {
    const len = this.pos - start;
    if (len < 0x80) {
      this.buf[start - 1] = len;
      return;
    }
    let extra = 0;
    for (let v = len >> 7; v > 0; v >>= 7) extra++;
    this.ensure(extra);
    this.buf.copyWithin(start + extra, start, this.pos);
    let p = start - 1;
    let v = len;
    while (v >= 0x80) {
      this.buf[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[p] = v;
    this.pos += extra;
  }

  string(field: number, s: string): void {
    const start = this.open(field);
    const n = s.length;
    this.ensure(n);
    const b = this.buf;
    let p = this.pos;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      b[p++] = c;
    }
    this.pos = p;
    if (i < n) {
      // Not ASCII: the rest through the encoder (at most three bytes a UTF-16 unit).
      this.ensure((n - i) * 3);
      const r = encoder.encodeInto(s.slice(i), this.buf.subarray(this.pos));
      this.pos += r.written;
    }
    this.close(start);
  }

  /** Hex digits as bytes (`field`: bytes; ids are 16 or 32 lower-case digits). */
  hex(field: number, h: string): void {
    const n = h.length >> 1;
    this.ensure(n + 2);
    const b = this.buf;
    let p = this.pos;
    b[p++] = (field << 3) | 2;
    b[p++] = n;
    for (let i = 0; i < h.length; i += 2) {
      b[p++] = (HEX_VALUE[h.charCodeAt(i)] << 4) | HEX_VALUE[h.charCodeAt(i + 1)];
    }
    this.pos = p;
  }

  /** Bytes as they are (a field written before). */
  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }
}

/** Each hex digit's value, by character code. */
const HEX_VALUE = new Uint8Array(128);
for (let c = 0; c < 16; c++) HEX_VALUE["0123456789abcdef".charCodeAt(c)] = c;

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

/** Bytes of `v` as a varint. */
function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

/** Writes `v` as a varint at `p` of `b` (room checked by the caller); the position after. */
function putVarint(b: Uint8Array, p: number, v: number): number {
  while (v >= 0x80) {
    b[p++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  b[p++] = v;
  return p;
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
