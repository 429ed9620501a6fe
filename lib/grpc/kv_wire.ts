/**
 * `KvEventBatch` (sglang_common.proto) read straight off the wire, for the KV-event stream's
 * rate: a busy worker sends thousands of blocks a second, each with its token ids, and going
 * through protobufjs's message objects, `Long`s and `toObject` copies cost about three times
 * this per block and most of the garbage. Same result as `decode` with the proto (absent scalars
 * as proto3 zeros, `oneof` named in `data`, 64-bit hashes as exact decimal strings); unknown
 * fields are skipped. Throws on truncated or malformed bytes.
 */

import type { KvBlockPb, KvCacheEventPb, KvEventBatchPb } from "./sglang_proto.ts";

/** A cursor over one message's bytes. */
class Reader {
  pos: number;
  /** The halves of the last `u64`. */
  lo = 0;
  hi = 0;
  constructor(readonly buf: Uint8Array, pos: number, readonly end: number) {
    this.pos = pos;
  }

  /** A varint as an unsigned 32-bit number (bits beyond the 32nd are dropped). */
  u32(): number {
    const b = this.buf;
    let p = this.pos;
    if (p + 5 > this.end) return this.#slowU32();
    let x = b[p++];
    let v = x & 0x7f;
    if (x >= 0x80) {
      x = b[p++];
      v |= (x & 0x7f) << 7;
      if (x >= 0x80) {
        x = b[p++];
        v |= (x & 0x7f) << 14;
        if (x >= 0x80) {
          x = b[p++];
          v |= (x & 0x7f) << 21;
          if (x >= 0x80) {
            x = b[p++];
            v |= (x & 0x0f) << 28;
            if (x >= 0x80) {
              this.pos = p;
              this.#rest();
              return v >>> 0;
            }
          }
        }
      }
    }
    this.pos = p;
    return v >>> 0;
  }

  /** `u32` near the end of the message, checking each byte. */
  #slowU32(): number {
    this.u64();
    return this.lo;
  }

  /** A varint, into `lo` and `hi` (its low and high 32-bit halves); returns this reader. */
  u64(): Reader {
    const b = this.buf;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error("KvEventBatch: truncated varint");
      const x = b[this.pos++];
      const bits = x & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (x < 0x80) {
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return this;
      }
    }
    throw new Error("KvEventBatch: varint longer than 10 bytes");
  }

  /** The length of a length-delimited field, checked against the message's end. */
  len(): number {
    const n = this.u32();
    if (this.pos + n > this.end) throw new Error("KvEventBatch: field runs past its message");
    return n;
  }

  /** Skips a field of wire type `wire`. */
  skip(wire: number): void {
    if (wire === 0) this.u64();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) {
      const n = this.len(); // moves past the length first
      this.pos += n;
    } else if (wire === 5) this.pos += 4;
    else throw new Error(`KvEventBatch: unsupported wire type ${wire}`);
    if (this.pos > this.end) throw new Error("KvEventBatch: field runs past its message");
  }

  /** The rest of an over-long varint (bits beyond what `u32` keeps). */
  #rest(): void {
    while (this.pos < this.end && this.buf[this.pos] >= 0x80) this.pos++;
    if (this.pos >= this.end) throw new Error("KvEventBatch: truncated varint");
    this.pos++;
  }
}

/** The signed 64-bit integer `r` last read, in decimal (exact). */
function int64(r: Reader): string {
  const lo = r.lo;
  const hi = r.hi;
  if (hi < 0x200000) return String(hi * 0x100000000 + lo); // below 2^53
  if (hi >= 0xffe00000) return String((hi - 0x100000000) * 0x100000000 + lo); // above -2^53
  return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString();
}

/** The unsigned 64-bit integer `r` last read, as a number (approximate beyond 2^53). */
function uint64(r: Reader): number {
  return r.hi * 0x100000000 + r.lo;
}

/** Decodes a `KvEventBatch` message. */
export function decodeKvEventBatch(bytes: Uint8Array): KvEventBatchPb {
  const r = new Reader(bytes, 0, bytes.length);
  const out: KvEventBatchPb = { sequence_number: 0, timestamp: 0, events: [] };
  while (r.pos < r.end) {
    const tag = r.u32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 0) out.sequence_number = uint64(r.u64());
    else if (field === 2 && wire === 1) {
      if (r.pos + 8 > r.end) throw new Error("KvEventBatch: truncated double");
      out.timestamp = new DataView(bytes.buffer, bytes.byteOffset + r.pos, 8).getFloat64(0, true);
      r.pos += 8;
    } else if (field === 3 && wire === 2) {
      const n = r.len();
      out.events.push(event(new Reader(bytes, r.pos, r.pos + n)));
      r.pos += n;
    } else if (field === 4 && wire === 0) out.dp_rank = r.u32() | 0;
    else r.skip(wire);
  }
  return out;
}

function event(r: Reader): KvCacheEventPb {
  const e: KvCacheEventPb = { event_id: 0 };
  while (r.pos < r.end) {
    const tag = r.u32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 0) e.event_id = uint64(r.u64());
    else if (field >= 2 && field <= 4 && wire === 2) {
      const n = r.len();
      const sub = new Reader(r.buf, r.pos, r.pos + n);
      r.pos += n;
      // A oneof: the last member on the wire wins.
      delete e.stored;
      delete e.removed;
      delete e.cleared;
      if (field === 2) {
        e.data = "stored";
        e.stored = stored(sub);
      } else if (field === 3) {
        e.data = "removed";
        e.removed = removed(sub);
      } else {
        e.data = "cleared";
        e.cleared = {};
      }
    } else r.skip(wire);
  }
  return e;
}

function stored(r: Reader): NonNullable<KvCacheEventPb["stored"]> {
  const s: NonNullable<KvCacheEventPb["stored"]> = { blocks: [] };
  while (r.pos < r.end) {
    const tag = r.u32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 2) {
      const n = r.len();
      s.blocks.push(block(new Reader(r.buf, r.pos, r.pos + n)));
      r.pos += n;
    } else if (field === 2 && wire === 0) s.parent_block_hash = int64(r.u64());
    else r.skip(wire);
  }
  return s;
}

function block(r: Reader): KvBlockPb {
  const b: KvBlockPb = { block_hash: "0", token_ids: [], block_size: 0 };
  while (r.pos < r.end) {
    const tag = r.u32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 0) b.block_hash = int64(r.u64());
    else if (field === 2 && wire === 2) {
      const n = r.len();
      const end = r.pos + n;
      const ids = b.token_ids;
      const packed = new Reader(r.buf, r.pos, end);
      while (packed.pos < end) ids.push(packed.u32());
      r.pos = end;
    } else if (field === 2 && wire === 0) b.token_ids.push(r.u32());
    else if (field === 3 && wire === 0) b.block_size = r.u32() | 0;
    else if (field === 4 && wire === 0) b.lora_id = int64(r.u64());
    else r.skip(wire);
  }
  return b;
}

function removed(r: Reader): NonNullable<KvCacheEventPb["removed"]> {
  const s: NonNullable<KvCacheEventPb["removed"]> = { block_hashes: [] };
  while (r.pos < r.end) {
    const tag = r.u32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 2) {
      const n = r.len();
      const end = r.pos + n;
      const packed = new Reader(r.buf, r.pos, end);
      while (packed.pos < end) s.block_hashes.push(int64(packed.u64()));
      r.pos = end;
    } else if (field === 1 && wire === 0) s.block_hashes.push(int64(r.u64()));
    else r.skip(wire);
  }
  return s;
}
