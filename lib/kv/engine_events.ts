/**
 * Decodes a vLLM or SGLang KV-event payload (msgpack) into a `KvEventBatch`.
 *
 * The engines encode msgspec structs. A batch is the array `[ts, events, data_parallel_rank?]`
 * (a map `{ts, events, data_parallel_rank}` is accepted too). Each event is tagged by its class
 * name, in one of two layouts, both accepted in one batch (a fleet mid-upgrade mixes them):
 * - array (engines before the switch to maps): `["BlockStored", block_hashes,
 *   parent_block_hash, token_ids, block_size, lora_id, medium?, ...]`,
 *   `["BlockRemoved", block_hashes, medium?, ...]`, `["AllBlocksCleared"]`; trailing fields
 *   may be missing (msgspec omits defaults) and newer ones appended are ignored;
 * - map (current vLLM and SGLang): `{"type": "BlockStored", "block_hashes": ..., ...}` with the
 *   same field names; unknown keys are ignored.
 *
 * `token_ids` holds `block_size` tokens per block, or none at all (stores of blocks offloaded to
 * CPU). SGLang's EAGLE radix tree keys on bigrams: a token given as a pair `[t_i, t_i+1]` counts
 * as `t_i`. Hashes become strings (see `events.ts`). Integers arrive as numbers, or as bigints
 * when msgpack used 64 bits, so none loses precision.
 *
 * An event of an unknown tag is skipped and counted in `skipped`: it comes from a newer engine,
 * and refusing it would drop the known events of the same batch. Anything malformed refuses the
 * whole batch with a `KvDecodeError` naming the path of the bad value (`$[1][0][3]`): applying
 * half a batch would leave the index wrong without saying so.
 */

import { decode } from "@msgpack/msgpack";
import type { BlockHash, KvEvent, KvEventBatch, StoredBlock } from "./events.ts";

/** A payload that is not a KV-event batch; the message names the path of the bad value. */
export class KvDecodeError extends Error {
  /** Builds the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "KvDecodeError";
  }
}

const MSGPACK_OPTIONS = { useBigInt64: true } as const;
const hexDigits = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** Decodes the msgpack `payload` of batch `seq`; throws `KvDecodeError` when malformed. */
export function decodeEngineBatch(payload: Uint8Array, seq: number): KvEventBatch {
  let raw: unknown;
  try {
    raw = decode(payload, MSGPACK_OPTIONS);
  } catch (e) {
    throw new KvDecodeError(`batch ${seq} is not msgpack: ${(e as Error).message}`, { cause: e });
  }
  try {
    return batchFrom(raw, seq);
  } catch (e) {
    if (e instanceof KvDecodeError) throw new KvDecodeError(`batch ${seq}: ${e.message}`);
    throw e;
  }
}

function batchFrom(raw: unknown, seq: number): KvEventBatch {
  let ts: unknown, events: unknown, rank: unknown;
  if (Array.isArray(raw)) [ts, events, rank] = raw;
  else if (isMap(raw)) ({ ts, events, data_parallel_rank: rank } = raw);
  else throw bad("$", "an array [ts, events, rank?]", raw);
  if (!Array.isArray(events)) throw bad("$[1]", "an array of events", events);
  const out: KvEvent[] = [];
  let skipped = 0;
  events.forEach((e, i) => {
    const event = eventFrom(e, `$[1][${i}]`);
    if (event) out.push(event);
    else skipped++;
  });
  return {
    seq,
    ts: numberAt(ts, "$[0]"),
    events: out,
    rank: rank === undefined || rank === null ? null : intAt(rank, "$[2]"),
    skipped,
  };
}

/** The named fields of one event in either layout (array positions mapped to names). */
const ARRAY_FIELDS: Record<string, readonly string[]> = {
  BlockStored: [
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
  ],
  BlockRemoved: ["block_hashes", "medium"],
  AllBlocksCleared: [],
};

/** One event, or null for an unknown tag. */
function eventFrom(raw: unknown, path: string): KvEvent | null {
  let tag: unknown;
  let field: (name: string) => [unknown, string];
  if (Array.isArray(raw)) {
    tag = raw[0];
    field = (name) => {
      const i = (ARRAY_FIELDS[tag as string] ?? []).indexOf(name) + 1;
      return [raw[i], `${path}[${i}]`];
    };
  } else if (isMap(raw)) {
    tag = raw.type;
    field = (name) => [raw[name], `${path}.${name}`];
  } else throw bad(path, "an event (array or map)", raw);
  if (typeof tag !== "string") throw bad(path, "an event tag", tag);
  switch (tag) {
    case "BlockStored": {
      const hashes = hashListAt(...field("block_hashes"));
      const [parent, parentPath] = field("parent_block_hash");
      const blockSize = intAt(...field("block_size"));
      if (blockSize < 1) throw bad(field("block_size")[1], "a positive block size", blockSize);
      const [lora, loraPath] = field("lora_id");
      return {
        kind: "stored",
        blocks: blocksOf(hashes, blockSize, ...field("token_ids")),
        parentHash: parent === null || parent === undefined ? null : hashAt(parent, parentPath),
        blockSize,
        loraId: lora === null || lora === undefined ? null : intAt(lora, loraPath),
        medium: mediumAt(...field("medium")),
      };
    }
    case "BlockRemoved":
      return {
        kind: "removed",
        hashes: hashListAt(...field("block_hashes")),
        medium: mediumAt(...field("medium")),
      };
    case "AllBlocksCleared":
      return { kind: "cleared" };
    default:
      return null;
  }
}

/** Splits `token_ids` into `block_size` tokens per hash (or none for any when none were sent). */
function blocksOf(
  hashes: BlockHash[],
  blockSize: number,
  raw: unknown,
  path: string,
): StoredBlock[] {
  if (!Array.isArray(raw)) throw bad(path, "an array of token ids", raw);
  const tokens = raw.map((t, i) => tokenAt(t, `${path}[${i}]`));
  if (tokens.length === 0) return hashes.map((hash) => ({ hash, tokenIds: [] }));
  if (tokens.length !== hashes.length * blockSize) {
    throw new KvDecodeError(
      `${path} has ${tokens.length} tokens for ${hashes.length} blocks of ${blockSize}`,
    );
  }
  return hashes.map((hash, i) => ({
    hash,
    tokenIds: tokens.slice(i * blockSize, (i + 1) * blockSize),
  }));
}

function hashListAt(raw: unknown, path: string): BlockHash[] {
  if (!Array.isArray(raw)) throw bad(path, "an array of block hashes", raw);
  return raw.map((h, i) => hashAt(h, `${path}[${i}]`));
}

/** A block hash as a string: integers in decimal, bytes as `0x` and hex. */
function hashAt(raw: unknown, path: string): BlockHash {
  if (typeof raw === "bigint") return raw.toString();
  if (typeof raw === "number" && Number.isInteger(raw)) return String(raw);
  if (raw instanceof Uint8Array) {
    let s = "0x";
    for (const b of raw) s += hexDigits[b];
    return s;
  }
  throw bad(path, "a block hash (integer or bytes)", raw);
}

/** A token id: a non-negative integer, or a bigram pair standing for its first token. */
function tokenAt(raw: unknown, path: string): number {
  if (Array.isArray(raw) && raw.length === 2) return tokenAt(raw[0], `${path}[0]`);
  const n = intAt(raw, path);
  if (n < 0) throw bad(path, "a token id", raw);
  return n;
}

function mediumAt(raw: unknown, path: string): string | null {
  if (raw === null || raw === undefined) return null;
  if (typeof raw !== "string") throw bad(path, "a medium name", raw);
  return raw;
}

/** A safe integer (from a number or a bigint). */
function intAt(raw: unknown, path: string): number {
  if (typeof raw === "number" && Number.isSafeInteger(raw)) return raw;
  if (
    typeof raw === "bigint" && raw <= BigInt(Number.MAX_SAFE_INTEGER) &&
    raw >= BigInt(Number.MIN_SAFE_INTEGER)
  ) return Number(raw);
  throw bad(path, "an integer", raw);
}

function numberAt(raw: unknown, path: string): number {
  if (typeof raw === "number" && Number.isFinite(raw)) return raw;
  if (typeof raw === "bigint") return Number(raw);
  throw bad(path, "a timestamp", raw);
}

function isMap(raw: unknown): raw is Record<string, unknown> {
  return typeof raw === "object" && raw !== null && !Array.isArray(raw) &&
    !(raw instanceof Uint8Array);
}

function bad(path: string, wanted: string, got: unknown): KvDecodeError {
  return new KvDecodeError(`${path} should be ${wanted}, got ${describe(got)}`);
}

/** A short rendering of a decoded value for error messages. */
function describe(v: unknown): string {
  if (v === undefined) return "nothing";
  if (typeof v === "bigint") return `${v}`;
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === "object" && v !== null) return "a map";
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}
