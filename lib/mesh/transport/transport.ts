/**
 * The mesh transport: how one router's SWIM core and stream manager reach another. Two
 * implementations ship: gRPC (`grpc.ts`, what routers use) and an in-memory network
 * (`memory.ts`, with drop, delay and partition controls under fake time, for cluster tests).
 * Callback-based, so the in-memory network runs thousands of routers deterministically without
 * promise scheduling.
 */

import type { AckMessage, MeshRequest, StreamFrame } from "../wire.ts";

/** Why a request got no answer. */
export type TransportErrorCode =
  /** Connection refused or reset: nobody is there right now. */
  | "unreachable"
  /** No answer within the timeout. */
  | "timeout"
  /** The transport is closed. */
  | "closed";

/** A failed request. */
export interface TransportError {
  /** What kind of failure. */
  code: TransportErrorCode;
  /** For logs. */
  message: string;
}

/** Completion of one request: exactly one of `err` and `reply` is set. */
export type ReplyCallback = (err: TransportError | null, reply: AckMessage | null) => void;

/** One end of a sync stream. */
export interface FrameConn {
  /**
   * Queues a frame for the peer. Returns false when the transport's own buffer is full: the
   * frame was still taken, but the caller should hold further frames until `onDrain`.
   */
  send(frame: StreamFrame): boolean;
  /** Installs the receiving side; call once, right after getting the connection. */
  listen(handlers: FrameHandlers): void;
  /** Closes the stream (both directions); `onClose` still fires once. */
  close(): void;
  /** The remote socket address, for logs ("" when unknown). */
  readonly remote: string;
}

/** Callbacks of one sync stream. */
export interface FrameHandlers {
  /** A decoded frame arrived. */
  onFrame(frame: StreamFrame): void;
  /** The transport buffer has room again. */
  onDrain(): void;
  /** The stream ended (peer closed, error, or `close()`); fires once. */
  onClose(reason: string): void;
}

/** Why the transport refused something a peer sent (logged and counted by the node). */
export type RejectReason =
  /** Undecodable bytes where a message was expected. */
  | "malformed"
  /** Over `MAX_MESSAGE_BYTES`. */
  | "oversized"
  /** Over the inbound request rate limit. */
  | "flood";

/** What a serving transport calls. */
export interface TransportHandlers {
  /** A request arrived; `respond` must be called exactly once. */
  onRequest(req: MeshRequest, respond: (ack: AckMessage) => void): void;
  /** A peer opened a sync stream. */
  onStream(conn: FrameConn): void;
  /** A peer sent something the transport refused. */
  onRejected(reason: RejectReason, detail: string): void;
}

/** A router's connection to the mesh. */
export interface MeshTransport {
  /** Starts accepting requests and streams; rejects if the address cannot be bound. */
  serve(handlers: TransportHandlers): Promise<void>;
  /** Sends `req` to `address` (`host:port`); `done` fires exactly once. */
  request(address: string, req: MeshRequest, timeoutMs: number, done: ReplyCallback): void;
  /** Opens a sync stream to `address`. */
  openStream(address: string): FrameConn;
  /** Drops any cached connection to `address` (its member was forgotten). */
  forget(address: string): void;
  /** Stops serving and closes every connection. */
  close(): Promise<void>;
}
