/**
 * Wire form of the replicated store's envelopes (`StoreBatch`, `StoreAck`, `StoreDigest` in
 * `proto/mesh.proto`): ops, the versions a batch delivered, and anti-entropy digests. Decoding
 * refuses malformed bytes and integers past 2^53 with `{ ok: false }` instead of throwing.
 */

import protobuf from "protobufjs";
import { MESH_PROTO } from "../transport/codec.ts";
import type { Op } from "./lww_store.ts";
import type { Version } from "./version.ts";

/** A key's version as exchanged in acks and digests. */
export interface KeyVersion extends Version {
  /** Namespace. */
  ns: string;
  /** Key. */
  key: string;
}

/** An anti-entropy message: bucket hashes, or the versions held in some buckets. */
export interface Digest {
  /** Per-bucket hashes (a summary), else empty. */
  buckets: number[];
  /** Versions held in `versionBuckets`. */
  versions: KeyVersion[];
  /** Buckets `versions` covers. */
  versionBuckets: number[];
  /** The receiver should answer with its versions of `versionBuckets`. */
  reply: boolean;
}

/** Largest batch or digest payload (keeps envelopes far below the 10 MiB message cap). */
export const BATCH_BYTES = 1 << 20;

/** A decode result. */
export type Decoded<T> = { ok: true; value: T } | { ok: false; detail: string };

const root = protobuf.parse(MESH_PROTO, { keepCase: true }).root;
const Batch = root.lookupType("smg.mesh.v1.StoreBatch");
const AckT = root.lookupType("smg.mesh.v1.StoreAck");
const DigestT = root.lookupType("smg.mesh.v1.StoreDigest");
const TO_OBJECT: protobuf.IConversionOptions = { longs: String, defaults: true };

interface VersionPb {
  ns: string;
  key: string;
  clock: string;
  replica: string;
}

/** A decimal integer from protobufjs, refused past 2^53 or below 0. */
export function safe(decimal: string): number {
  const n = Number(decimal);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`integer ${decimal} out of range`);
  return n;
}

/** Decodes `bytes` as `type` and maps it, or says why it could not. */
export function decode<T>(
  type: protobuf.Type,
  bytes: Uint8Array,
  map: (o: never) => T,
): Decoded<T> {
  try {
    const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return { ok: true, value: map(type.toObject(type.decode(view), TO_OBJECT) as never) };
  } catch (e) {
    return { ok: false, detail: `${type.name}: ${e instanceof Error ? e.message : String(e)}` };
  }
}

const versionOf = (v: VersionPb): KeyVersion => ({
  ns: v.ns,
  key: v.key,
  clock: safe(v.clock),
  replica: v.replica,
});

/** Encodes a batch of ops. */
export function encodeBatch(ops: readonly Op[]): Uint8Array {
  return Batch.encode({
    ops: ops.map((o) => ({
      ns: o.ns,
      key: o.key,
      value: o.value ?? new Uint8Array(0),
      removed: o.value === null,
      clock: o.clock,
      replica: o.replica,
    })),
  }).finish();
}

/** Decodes a batch of ops. */
export function decodeBatch(bytes: Uint8Array): Decoded<Op[]> {
  return decode(
    Batch,
    bytes,
    (o: { ops: (VersionPb & { value: Uint8Array; removed: boolean })[] }) =>
      o.ops.map((p) => ({ ...versionOf(p), value: p.removed ? null : p.value })),
  );
}

/** An ack: versions a batch delivered, and those of them refused for a collected removal. */
export interface StoreAckMessage {
  versions: KeyVersion[];
  /** Refused: that key's removal was collected at or after this version. */
  collected: KeyVersion[];
  /** Refused: at or below the receiver's collection horizon. */
  belowHorizon: KeyVersion[];
  /** The receiver's clock. */
  clock: number;
}

/** Encodes an ack. */
export function encodeAck(ack: StoreAckMessage): Uint8Array {
  return AckT.encode({ ...ack, below_horizon: ack.belowHorizon }).finish();
}

/** Decodes an ack. */
export function decodeAck(bytes: Uint8Array): Decoded<StoreAckMessage> {
  return decode(AckT, bytes, (o: {
    versions: VersionPb[];
    collected: VersionPb[];
    below_horizon: VersionPb[];
    clock: string;
  }) => ({
    versions: o.versions.map(versionOf),
    collected: o.collected.map(versionOf),
    belowHorizon: o.below_horizon.map(versionOf),
    clock: safe(o.clock),
  }));
}

/** Encodes a digest. */
export function encodeDigest(d: Digest): Uint8Array {
  return DigestT.encode({
    buckets: d.buckets,
    versions: d.versions,
    version_buckets: d.versionBuckets,
    reply: d.reply,
  }).finish();
}

/** Decodes a digest. */
export function decodeDigest(bytes: Uint8Array): Decoded<Digest> {
  return decode(DigestT, bytes, (o: {
    buckets: string[];
    versions: VersionPb[];
    version_buckets: number[];
    reply: boolean;
  }) => ({
    buckets: o.buckets.map(safe),
    versions: o.versions.map(versionOf),
    versionBuckets: o.version_buckets,
    reply: o.reply,
  }));
}
