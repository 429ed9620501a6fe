/**
 * The engines' msgpack payloads, encoded here in their exact layouts (msgspec's array and map
 * forms, vLLM's and SGLang's fields), decode into the gateway's events; hashes past 2^53, signed
 * and byte-string hashes keep every bit; unknown tags are skipped; anything malformed is refused
 * with an error naming where.
 */

import assert from "node:assert/strict";
import { encode } from "@msgpack/msgpack";
import { decodeEngineBatch, KvDecodeError } from "../../lib/kv/engine_events.ts";

/** msgspec writes integers in their smallest form and 64-bit ones as uint64/int64. */
const pack = (v: unknown) => encode(v, { useBigInt64: true });

const U64_MAX = 18446744073709551615n;
const ABOVE_2_53 = 9007199254740993n; // 2^53 + 1: a double would round it to 2^53

Deno.test("engine events: vLLM's array layout with rank, medium and uint64 hashes", () => {
  const payload = pack([
    1789095808.5,
    [
      ["BlockStored", [U64_MAX, ABOVE_2_53], null, [1, 2, 3, 4, 5, 6, 7, 8], 4, null, "GPU"],
      ["BlockRemoved", [U64_MAX], "GPU"],
      ["AllBlocksCleared"],
    ],
    2,
  ]);
  assert.deepEqual(decodeEngineBatch(payload, 7), {
    seq: 7,
    ts: 1789095808.5,
    rank: 2,
    skipped: 0,
    events: [
      {
        kind: "stored",
        blocks: [
          { hash: "18446744073709551615", tokenIds: [1, 2, 3, 4] },
          { hash: "9007199254740993", tokenIds: [5, 6, 7, 8] },
        ],
        parentHash: null,
        blockSize: 4,
        loraId: null,
        medium: "GPU",
      },
      { kind: "removed", hashes: ["18446744073709551615"], medium: "GPU" },
      { kind: "cleared" },
    ],
  });
});

Deno.test("engine events: the oldest array layout (no medium, no rank) and a parent hash", () => {
  const batch = decodeEngineBatch(
    pack([1.0, [["BlockStored", [11], 10, [5, 6], 2, 3], ["BlockRemoved", [11]]]]),
    0,
  );
  assert.equal(batch.rank, null);
  assert.deepEqual(batch.events, [
    {
      kind: "stored",
      blocks: [{ hash: "11", tokenIds: [5, 6] }],
      parentHash: "10",
      blockSize: 2,
      loraId: 3,
      medium: null,
    },
    { kind: "removed", hashes: ["11"], medium: null },
  ]);
});

Deno.test("engine events: the map layout with byte hashes, unknown keys ignored", () => {
  const h1 = new Uint8Array([0x9f, 0x1c, 0x00, 0xff]);
  const parent = new Uint8Array([0x01, 0x02]);
  const batch = decodeEngineBatch(
    pack([2.5, [
      {
        type: "BlockStored",
        block_hashes: [h1],
        parent_block_hash: parent,
        token_ids: [151644, 872],
        block_size: 2,
        lora_id: null,
        medium: "GPU",
        lora_name: null,
        extra_keys: [null],
        group_idx: 0,
        kv_cache_spec_kind: "full_attention",
      },
      { type: "BlockRemoved", block_hashes: [h1], medium: "CPU", group_idx: 0 },
      { type: "AllBlocksCleared" },
    ], 0]),
    3,
  );
  assert.deepEqual(batch.events, [
    {
      kind: "stored",
      blocks: [{ hash: "0x9f1c00ff", tokenIds: [151644, 872] }],
      parentHash: "0x0102",
      blockSize: 2,
      loraId: null,
      medium: "GPU",
    },
    { kind: "removed", hashes: ["0x9f1c00ff"], medium: "CPU" },
    { kind: "cleared" },
  ]);
});

Deno.test("engine events: a map-shaped batch envelope is accepted too", () => {
  const batch = decodeEngineBatch(
    pack({ ts: 3, events: [["AllBlocksCleared"]], data_parallel_rank: 1 }),
    1,
  );
  assert.deepEqual([batch.ts, batch.rank, batch.events], [3, 1, [{ kind: "cleared" }]]);
});

Deno.test("engine events: SGLang's signed 64-bit hashes and EAGLE bigram tokens", () => {
  const batch = decodeEngineBatch(
    pack([1, [[
      "BlockStored",
      [-9223372036854775808n, -42],
      -1n,
      [[1, 2], [2, 3], [3, 4], [
        4,
        5,
      ]],
      2,
      null,
    ]]]),
    0,
  );
  const stored = batch.events[0];
  assert.equal(stored.kind, "stored");
  assert.deepEqual(stored.blocks, [
    { hash: "-9223372036854775808", tokenIds: [1, 2] },
    { hash: "-42", tokenIds: [3, 4] },
  ]);
  assert.equal(stored.parentHash, "-1");
});

Deno.test("engine events: a hash is one string however wide msgpack wrote it", () => {
  // 5 as uint64 (0xcf) decodes to a bigint, 5 as a positive fixint to a number: both are "5".
  const wide = new Uint8Array([0xcf, 0, 0, 0, 0, 0, 0, 0, 5]);
  const events = pack([0, [["BlockRemoved", [5]]]]);
  const body = [...events.subarray(0, events.length - 1), ...wide];
  const batch = decodeEngineBatch(new Uint8Array(body), 0);
  const narrow = decodeEngineBatch(events, 0);
  assert.deepEqual(batch.events, narrow.events);
  assert.deepEqual(batch.events, [{ kind: "removed", hashes: ["5"], medium: null }]);
});

Deno.test("engine events: stores without token ids (CPU offload) keep their hashes", () => {
  const batch = decodeEngineBatch(
    pack([0, [{
      type: "BlockStored",
      block_hashes: [1, 2],
      parent_block_hash: null,
      token_ids: [],
      block_size: 16,
      lora_id: null,
      medium: "CPU",
    }]]),
    0,
  );
  assert.deepEqual(batch.events[0].kind === "stored" && batch.events[0].blocks, [
    { hash: "1", tokenIds: [] },
    { hash: "2", tokenIds: [] },
  ]);
});

Deno.test("engine events: unknown tags are skipped and counted, known ones kept", () => {
  const batch = decodeEngineBatch(
    pack([0, [["BlockPinned", [1]], ["BlockRemoved", [1]], { type: "Future", x: 1 }]]),
    0,
  );
  assert.equal(batch.skipped, 2);
  assert.deepEqual(batch.events, [{ kind: "removed", hashes: ["1"], medium: null }]);
});

Deno.test("engine events: malformed payloads are refused with the path of the bad value", () => {
  const cases: [string, Uint8Array, RegExp][] = [
    ["not msgpack", new Uint8Array([0xc1]), /batch 4 is not msgpack/],
    ["trailing bytes", new Uint8Array([...pack([0, []]), 0x01]), /batch 4 is not msgpack/],
    ["a string batch", pack("hello"), /\$ should be an array \[ts, events, rank\?\], got "hello"/],
    ["events not an array", pack([0, 5]), /\$\[1\] should be an array of events, got 5/],
    ["no timestamp", pack([null, []]), /\$\[0\] should be a timestamp/],
    [
      "a float hash",
      pack([0, [["BlockRemoved", [1.5]]]]),
      /\$\[1\]\[0\]\[1\]\[0\] should be a block hash/,
    ],
    [
      "a string hash",
      pack([0, [{ type: "BlockRemoved", block_hashes: ["ab"] }]]),
      /\$\[1\]\[0\]\.block_hashes\[0\] should be a block hash/,
    ],
    [
      "tokens not a multiple of the blocks",
      pack([0, [["BlockStored", [1, 2], null, [1, 2, 3], 2, null]]]),
      /\$\[1\]\[0\]\[3\] has 3 tokens for 2 blocks of 2/,
    ],
    ["block size 0", pack([0, [["BlockStored", [1], null, [], 0, null]]]), /positive block size/],
    [
      "a tag that is no string",
      pack([0, [[7, [1]]]]),
      /\$\[1\]\[0\] should be an event tag, got 7/,
    ],
    ["an event that is a number", pack([0, [3]]), /\$\[1\]\[0\] should be an event/],
    [
      "a negative token",
      pack([0, [["BlockStored", [1], null, [-1], 1, null]]]),
      /should be a token id/,
    ],
    ["a medium that is a number", pack([0, [["BlockRemoved", [1], 3]]]), /should be a medium name/],
    ["a rank that is a string", pack([0, [], "x"]), /\$\[2\] should be an integer/],
  ];
  for (const [what, payload, message] of cases) {
    assert.throws(() => decodeEngineBatch(payload, 4), (e: unknown) => {
      assert.ok(e instanceof KvDecodeError, `${what}: ${e}`);
      assert.match(e.message, message, what);
      return true;
    });
  }
});
