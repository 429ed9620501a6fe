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
  buf = new Uint8Array(64 * 1024);
  pos = 0;

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

  /** Hex digits as bytes (`field`: bytes). */
  hex(field: number, h: string): void {
    const n = h.length >> 1;
    this.varint((field << 3) | 2);
    this.varint(n);
    this.ensure(n);
    for (let i = 0; i < n; i++) {
      this.buf[this.pos++] = (hexDigit(h.charCodeAt(2 * i)) << 4) |
        hexDigit(h.charCodeAt(2 * i + 1));
    }
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }
}

const hexDigit = (c: number): number => c <= 57 ? c - 48 : c - 87;

/** `KeyValue` fields of `attrs` at `field`. */
function attributes(w: Writer, field: number, attrs: Attrs): void {
  for (let i = 0; i + 1 < attrs.length; i += 2) {
    const kv = w.open(field);
    w.string(1, attrs[i] as string);
    const any = w.open(2);
    const v = attrs[i + 1];
    if (typeof v === "string") w.string(1, v);
    else if (typeof v === "boolean") {
      w.tag(2, 0);
      w.byte(v ? 1 : 0);
    } else if (Number.isSafeInteger(v)) {
      w.tag(3, 0);
      w.int64(v);
    } else {
      w.tag(4, 1);
      w.double(v);
    }
    w.close(any);
    w.close(kv);
  }
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

/** Who the spans are from: the resource's attributes and the instrumentation scope. */
export interface Origin {
  /** Resource attributes (`service.name` first), flat key-value list. */
  resource: Attrs;
  /** The instrumentation scope's name and version. */
  scope: { name: string; version: string };
}

/** Encodes spans into one `ExportTraceServiceRequest`, reusing its buffer between batches. */
export class OtlpEncoder {
  readonly #w = new Writer();
  readonly #origin: Origin;

  constructor(origin: Origin) {
    this.#origin = origin;
  }

  /** The request's bytes (a copy: the buffer is reused). */
  encode(spans: readonly Span[]): Uint8Array<ArrayBuffer> {
    const w = this.#w;
    w.reset();
    const rs = w.open(1); // ResourceSpans
    const res = w.open(1); // Resource
    attributes(w, 1, this.#origin.resource);
    w.close(res);
    const ss = w.open(2); // ScopeSpans
    const scope = w.open(1);
    w.string(1, this.#origin.scope.name);
    w.string(2, this.#origin.scope.version);
    w.close(scope);
    for (const s of spans) span(w, s);
    w.close(ss);
    w.close(rs);
    return w.buf.slice(0, w.pos);
  }
}
