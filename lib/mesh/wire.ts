/**
 * The mesh's messages as the SWIM core and the transports see them (the protobuf contract is
 * `proto/mesh.proto`; `transport/codec.ts` maps between the two). Every request gets exactly
 * one `Ack` back; errors a peer wants the sender to know travel in `Ack.error`.
 */

import type { MemberUpdate } from "./member.ts";

/** The largest gRPC message either side sends or accepts (SMG's 10 MiB). */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** Direct probe, status broadcast or full-state exchange (join, push-pull, reconnect). */
export interface PingMessage {
  /** Discriminator. */
  kind: "ping";
  /** Sender's sequence number, echoed in the ack. */
  seq: number;
  /** Sender's name. */
  from: string;
  /** Sender's advertised address. */
  fromAddress: string;
  /** Name the sender believes lives at the address; "" when it does not know (join by URL). */
  to: string;
  /** Piggybacked membership updates; the whole table when `fullState`. */
  updates: MemberUpdate[];
  /** `updates` is the sender's whole table, and it wants the receiver's whole table back. */
  fullState: boolean;
}

/** "Please probe `target` for me" (SWIM's ping-req). */
export interface PingReqMessage {
  /** Discriminator. */
  kind: "pingReq";
  /** Sender's sequence number, echoed in the ack. */
  seq: number;
  /** Sender's name. */
  from: string;
  /** The member to probe. */
  target: { name: string; address: string };
  /** Piggybacked membership updates. */
  updates: MemberUpdate[];
}

/** A request one router sends another. */
export type MeshRequest = PingMessage | PingReqMessage;

/** Why a peer refused a request. */
export type AckError =
  | ""
  /** The sender's name belongs to another live member (or to the receiver itself). */
  | "name_conflict"
  /** The receiver is not the member the sender meant (`PingMessage.to`). */
  | "wrong_node"
  /** The receiver is leaving and answers nothing. */
  | "leaving";

/** The one answer to every request. */
export interface AckMessage {
  /** The request's seq. */
  seq: number;
  /** Responder's name. */
  from: string;
  /** For a ping-req: the intermediary could not reach the target in time (Lifeguard's nack). */
  nack: boolean;
  /** Piggybacked updates; the whole table when the request asked for full state. */
  updates: MemberUpdate[];
  /** `updates` is the responder's whole table. */
  fullState: boolean;
  /** Non-empty when the request was refused. */
  error: AckError;
}

/**
 * What a sync-stream envelope carries: store batches, acks, digests, tree deltas, repairs, and
 * each router's load on the workers.
 */
export type EnvelopeType =
  | "crdt_batch"
  | "crdt_ack"
  | "digest"
  | "tree_deltas"
  | "tree_repair_request"
  | "tree_repair_page"
  | "worker_loads";

/** Every envelope type, in the protobuf enum's order (index + 1 is the wire value). */
export const ENVELOPE_TYPES: readonly EnvelopeType[] = [
  "crdt_batch",
  "crdt_ack",
  "digest",
  "tree_deltas",
  "tree_repair_request",
  "tree_repair_page",
  "worker_loads",
];

/** The body of one sync-stream frame. */
export type FrameBody =
  /** First frame from the opener: who it is and whom it means. */
  | { kind: "hello"; to: string }
  /** Keeps an idle stream from timing out. */
  | { kind: "heartbeat" }
  /** Replicated state. */
  | { kind: "envelope"; type: EnvelopeType; payload: Uint8Array }
  /** A frame whose body this version does not know (counted and ignored). */
  | { kind: "unknown" };

/** One frame on a sync stream; every frame names its sender, which must not change. */
export interface StreamFrame {
  /** Sender's name. */
  from: string;
  /** Per-stream counter, for logs only. */
  seq: number;
  /** What it carries. */
  body: FrameBody;
}
