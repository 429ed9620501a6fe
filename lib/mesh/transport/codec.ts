/**
 * Bytes <-> mesh messages: encodes wire.ts types as the protobuf messages of `proto/mesh.proto`
 * and decodes what a peer sent, refusing anything this version cannot interpret. In: wire.ts
 * values or a received buffer. Out: a `Buffer` for grpc-js, or a `Decoded` result that says
 * what was wrong.
 *
 * The proto text is embedded at build time (a text import, which `deno bundle` inlines), parsed
 * once by protobufjs when this module loads, and is the only description of the wire format:
 * the gRPC method paths come from its `Gossip` service too.
 *
 * Decoding is strict where half-applying would be wrong and lenient where a newer peer may have
 * added something: a member status this version does not know, an `Ack.error` it does not know
 * or an integer above 2^53 - 1 makes the message malformed; a frame with no body, an unknown
 * body or an unknown envelope type decodes to `{ kind: "unknown" }` (counted and ignored).
 */

import { Buffer } from "node:buffer";
import protobuf from "protobufjs";
import protoText from "../../../proto/mesh.proto" with { type: "text" };
import { MEMBER_STATUSES, type MemberUpdate } from "../member.ts";
import {
  type AckError,
  type AckMessage,
  ENVELOPE_TYPES,
  type FrameBody,
  type PingMessage,
  type PingReqMessage,
  type StreamFrame,
} from "../wire.ts";

/** The result of decoding a peer's bytes: the message, or why it was refused. */
export type Decoded<T> = { ok: true; value: T } | { ok: false; detail: string };

/** The proto text the codec was built from (embedded, so the bundle reads no file). */
export const MESH_PROTO: string = protoText;

const root = protobuf.parse(protoText, { keepCase: true }).root;
const PingRequest = root.lookupType("smg.mesh.v1.PingRequest");
const PingReqRequest = root.lookupType("smg.mesh.v1.PingReqRequest");
const Ack = root.lookupType("smg.mesh.v1.Ack");
const Frame = root.lookupType("smg.mesh.v1.StreamFrame");

/** The gRPC method paths of the `Gossip` service, read from the proto. */
export const GOSSIP_PATHS: { ping: string; pingReq: string; syncStream: string } = {
  ping: methodPath("Ping", false),
  pingReq: methodPath("PingReq", false),
  syncStream: methodPath("SyncStream", true),
};

function methodPath(name: string, streaming: boolean): string {
  const service = root.lookupService("smg.mesh.v1.Gossip");
  const method = service.methods[name];
  if (!method || !!method.requestStream !== streaming || !!method.responseStream !== streaming) {
    throw new Error(`mesh.proto: Gossip.${name} is missing or has the wrong streaming shape`);
  }
  return `/${service.fullName.slice(1)}/${name}`;
}

const ACK_ERRORS: readonly AckError[] = ["", "name_conflict", "wrong_node", "leaving"];

// Decoded messages are read through `toObject`, so 64-bit integers arrive as decimal strings
// whether or not protobufjs found the `long` package.
const TO_OBJECT: protobuf.IConversionOptions = { longs: String, defaults: true, oneofs: true };

/** A protobuf `Member` as `toObject` returns it. */
interface MemberPb {
  name: string;
  address: string;
  status: number;
  incarnation: string;
  from: string;
}

/** Thrown inside a decoder and turned into `{ ok: false }` at its edge. */
class Malformed extends Error {}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
}

function encodeMembers(updates: readonly MemberUpdate[]): object[] {
  return updates.map((m) => ({
    name: m.name,
    address: m.address,
    status: MEMBER_STATUSES.indexOf(m.status),
    incarnation: m.incarnation,
    from: m.from,
  }));
}

function decodeMembers(list: MemberPb[]): MemberUpdate[] {
  return list.map((m) => {
    const status = MEMBER_STATUSES[m.status];
    if (status === undefined) throw new Malformed(`unknown member status ${m.status}`);
    return {
      name: m.name,
      address: m.address,
      status,
      incarnation: safeInt(m.incarnation),
      from: m.from,
    };
  });
}

function safeInt(decimal: string): number {
  const n = Number(decimal);
  if (!Number.isSafeInteger(n)) throw new Malformed(`integer ${decimal} is above 2^53 - 1`);
  return n;
}

function decodeWith<T>(type: protobuf.Type, bytes: Uint8Array, map: (o: never) => T): Decoded<T> {
  try {
    // A plain view, never a Buffer: protobufjs's Buffer reader clamps a string that runs past
    // the end instead of refusing it.
    const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return { ok: true, value: map(type.toObject(type.decode(view), TO_OBJECT) as never) };
  } catch (e) {
    return { ok: false, detail: `${type.name}: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** Encodes a ping as a `PingRequest`. */
export function encodePing(m: PingMessage): Buffer {
  return toBuffer(
    PingRequest.encode({
      seq: m.seq,
      from: m.from,
      from_address: m.fromAddress,
      to: m.to,
      updates: encodeMembers(m.updates),
      full_state: m.fullState,
    }).finish(),
  );
}

/** Decodes a `PingRequest`. */
export function decodePing(bytes: Uint8Array): Decoded<PingMessage> {
  return decodeWith(PingRequest, bytes, (o: {
    seq: string;
    from: string;
    from_address: string;
    to: string;
    updates: MemberPb[];
    full_state: boolean;
  }) => ({
    kind: "ping",
    seq: safeInt(o.seq),
    from: o.from,
    fromAddress: o.from_address,
    to: o.to,
    updates: decodeMembers(o.updates),
    fullState: o.full_state,
  }));
}

/** Encodes a ping-req as a `PingReqRequest`. */
export function encodePingReq(m: PingReqMessage): Buffer {
  return toBuffer(
    PingReqRequest.encode({
      seq: m.seq,
      from: m.from,
      target_name: m.target.name,
      target_address: m.target.address,
      updates: encodeMembers(m.updates),
    }).finish(),
  );
}

/** Decodes a `PingReqRequest`. */
export function decodePingReq(bytes: Uint8Array): Decoded<PingReqMessage> {
  return decodeWith(PingReqRequest, bytes, (o: {
    seq: string;
    from: string;
    target_name: string;
    target_address: string;
    updates: MemberPb[];
  }) => ({
    kind: "pingReq",
    seq: safeInt(o.seq),
    from: o.from,
    target: { name: o.target_name, address: o.target_address },
    updates: decodeMembers(o.updates),
  }));
}

/** Encodes an ack. */
export function encodeAck(a: AckMessage): Buffer {
  return toBuffer(
    Ack.encode({
      seq: a.seq,
      from: a.from,
      nack: a.nack,
      updates: encodeMembers(a.updates),
      full_state: a.fullState,
      error: a.error,
    }).finish(),
  );
}

/** Decodes an `Ack`; an `error` this version does not know makes it malformed. */
export function decodeAck(bytes: Uint8Array): Decoded<AckMessage> {
  return decodeWith(Ack, bytes, (o: {
    seq: string;
    from: string;
    nack: boolean;
    updates: MemberPb[];
    full_state: boolean;
    error: string;
  }) => {
    const error = ACK_ERRORS.find((e) => e === o.error);
    if (error === undefined) throw new Malformed(`unknown ack error ${JSON.stringify(o.error)}`);
    return {
      seq: safeInt(o.seq),
      from: o.from,
      nack: o.nack,
      updates: decodeMembers(o.updates),
      fullState: o.full_state,
      error,
    };
  });
}

/** Encodes a sync-stream frame; an `unknown` body is sent as a frame without a body. */
export function encodeFrame(f: StreamFrame): Buffer {
  const b = f.body;
  const body = b.kind === "hello"
    ? { hello: { to: b.to } }
    : b.kind === "heartbeat"
    ? { heartbeat: {} }
    : b.kind === "envelope"
    ? { envelope: { type: ENVELOPE_TYPES.indexOf(b.type) + 1, payload: b.payload } }
    : {};
  return toBuffer(Frame.encode({ from: f.from, seq: f.seq, ...body }).finish());
}

/** Decodes a `StreamFrame`; a body this version does not know becomes `{ kind: "unknown" }`. */
export function decodeFrame(bytes: Uint8Array): Decoded<StreamFrame> {
  return decodeWith(Frame, bytes, (o: {
    from: string;
    seq: string;
    body?: string;
    hello?: { to: string };
    envelope?: { type: number; payload: Uint8Array };
  }) => {
    let body: FrameBody = { kind: "unknown" };
    if (o.body === "hello" && o.hello) body = { kind: "hello", to: o.hello.to };
    else if (o.body === "heartbeat") body = { kind: "heartbeat" };
    else if (o.body === "envelope" && o.envelope) {
      const type = ENVELOPE_TYPES[o.envelope.type - 1];
      const p = o.envelope.payload;
      // A view over the received bytes (no copy); an empty payload comes back from protobufjs
      // as a Buffer, made a plain Uint8Array here so every payload compares alike.
      if (type) {
        body = {
          kind: "envelope",
          type,
          payload: new Uint8Array(p.buffer, p.byteOffset, p.length),
        };
      }
    }
    return { from: o.from, seq: safeInt(o.seq), body };
  });
}
