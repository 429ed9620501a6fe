import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { decodeKvEventBatch } from "../../lib/grpc/kv_wire.ts";
import { METHODS } from "../../lib/grpc/sglang_proto.ts";
import { fromPb } from "../../lib/kv/feature.ts";

const TYPE = METHODS.subscribeKvEvents.response;

/** `value` encoded by protobufjs (64-bit fields may be decimal strings). */
function encode(value: object): Uint8Array {
  return TYPE.encode(TYPE.fromObject(value)).finish();
}

/** What protobufjs makes of `bytes`, hashes as exact decimal strings: the reference. */
function reference(bytes: Uint8Array) {
  const o = TYPE.toObject(TYPE.decode(bytes), {
    longs: String,
    defaults: true,
    oneofs: true,
    arrays: true,
  });
  return fromPb({ ...o, sequence_number: Number(o.sequence_number) } as never);
}

/** A 64-bit signed hash of every magnitude: small, near ±2^53, and full width. */
function hash(r: () => number): string | number {
  const kind = Math.floor(r() * 4);
  if (kind === 0) return Math.floor(r() * 1000) - 500;
  if (kind === 1) return (r() < 0.5 ? -1 : 1) * (2 ** 53 - Math.floor(r() * 4));
  const bits = (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32));
  return BigInt.asIntN(64, bits).toString();
}

function randomBatch(r: () => number, seq: number) {
  const events = [];
  const n = Math.floor(r() * 5);
  for (let i = 0; i < n; i++) {
    const kind = Math.floor(r() * 3);
    if (kind === 0) {
      const blocks = Array.from({ length: 1 + Math.floor(r() * 6) }, () => ({
        block_hash: hash(r),
        token_ids: Array.from({ length: 4 }, () => Math.floor(r() * 2 ** 32)),
        block_size: 4,
        ...(r() < 0.3 ? { lora_id: hash(r) } : {}),
      }));
      events.push({
        event_id: i,
        stored: { blocks, ...(r() < 0.7 ? { parent_block_hash: hash(r) } : {}) },
      });
    } else if (kind === 1) {
      events.push({
        event_id: i,
        removed: { block_hashes: Array.from({ length: Math.floor(r() * 5) }, () => hash(r)) },
      });
    } else events.push({ event_id: i, cleared: {} });
  }
  return {
    sequence_number: seq,
    timestamp: 1_700_000_000 + r(),
    events,
    ...(r() < 0.5 ? { dp_rank: Math.floor(r() * 8) } : {}),
  };
}

Deno.test("kv_wire: decodes random batches exactly as protobufjs does, 64-bit hashes included", () => {
  const r = seededRandom(7);
  for (let seq = 1; seq <= 500; seq++) {
    const bytes = encode(randomBatch(r, seq));
    assert.deepEqual(fromPb(decodeKvEventBatch(bytes)), reference(bytes));
  }
});

Deno.test("kv_wire: the extreme hashes come out as their exact decimal strings", () => {
  const cases: [string | number, string][] = [
    [0, "0"],
    [-1, "-1"],
    [2 ** 53 - 1, "9007199254740991"],
    [-(2 ** 53), "-9007199254740992"],
    ["9007199254740993", "9007199254740993"],
    ["9223372036854775807", "9223372036854775807"],
    ["-9223372036854775808", "-9223372036854775808"],
  ];
  for (const [h, want] of cases) {
    const bytes = encode({
      sequence_number: 1,
      events: [{ removed: { block_hashes: [h] } }],
    });
    assert.deepEqual(decodeKvEventBatch(bytes).events[0].removed!.block_hashes, [want]);
  }
});

Deno.test("kv_wire: unknown fields are skipped, unpacked token ids read", () => {
  // KvBlock { block_hash = 5, token_ids = 1 (unpacked), token_ids = 300 (unpacked),
  // block_size = 2, field 9 = fixed32, field 10 = "xy" }
  const block = [8, 5, 0x10, 1, 0x10, 0xac, 2, 0x18, 2, 0x4d, 1, 2, 3, 4, 0x52, 2, 0x78, 0x79];
  const stored = [0x0a, block.length, ...block];
  const event = [0x12, stored.length, ...stored];
  // KvEventBatch { sequence_number = 3, field 15 = fixed64, events = [event] }
  const fixed64 = [0x79, 0, 0, 0, 0, 0, 0, 0, 0];
  const batch = new Uint8Array([8, 3, ...fixed64, 0x1a, event.length, ...event]);
  const out = decodeKvEventBatch(batch);
  assert.deepEqual(out.sequence_number, 3);
  assert.deepEqual(out.events[0].stored!.blocks, [{
    block_hash: "5",
    token_ids: [1, 300],
    block_size: 2,
  }]);
});

Deno.test("kv_wire: truncated and malformed bytes throw instead of decoding garbage", () => {
  const bytes = encode(randomBatch(seededRandom(3), 9));
  let threw = 0;
  for (let cut = 1; cut < bytes.length; cut++) {
    try {
      decodeKvEventBatch(bytes.subarray(0, cut));
    } catch (e) {
      if (!/KvEventBatch/.test((e as Error).message)) throw e;
      threw++;
    }
  }
  // A cut on a field boundary of the outer message is a shorter valid batch; most cuts are not.
  if (threw < (bytes.length - 1) / 2) {
    throw new Error(`only ${threw} of ${bytes.length - 1} cuts threw`);
  }
  assert.throws(() => decodeKvEventBatch(new Uint8Array([0x1a, 0x05, 0x08])), /KvEventBatch/);
  assert.throws(() => decodeKvEventBatch(new Uint8Array([0x0b])), /wire type/);
  const long = [0x08, ...new Array(10).fill(0xff), 0x01];
  assert.throws(() => decodeKvEventBatch(new Uint8Array(long)), /10 bytes/);
});
