/**
 * Protobuf's wire format, written by hand into a growing buffer: varints (and how many bytes one
 * takes), fixed 64-bit fields, doubles, strings (ASCII copied, the rest through `TextEncoder`),
 * hex ids as bytes, and length-delimited fields whose length is written after their content
 * (`open`/`close`: the content moved right when the length needs more than the byte reserved).
 * What OTLP's messages are made of (`otlp.ts`).
 */

const encoder = new TextEncoder();

/** A growing protobuf writer. */
export class Writer {
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
    this.pos = putVarint(this.buf, this.pos, v);
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

/** Bytes of `v` as a varint. */
export function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

/** Writes `v` as a varint at `p` of `b` (room checked by the caller); the position after. */
export function putVarint(b: Uint8Array, p: number, v: number): number {
  while (v >= 0x80) {
    b[p++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  b[p++] = v;
  return p;
}
