/**
 * One end of a `Gossip.SyncStream` call as a `FrameConn`, for both the client (opener) and the
 * server (acceptor) side. In: the grpc-js duplex call carrying raw bytes. Out: decoded frames,
 * drain and close events to the stream manager, and a `malformed` report when a peer's frame
 * does not decode (that stream is then closed: INVALID_ARGUMENT from a server, a cancel from a
 * client).
 *
 * Close semantics: `onClose` fires once, for whichever comes first of a local `close()`, the
 * peer ending or cancelling, an error, or the call's final status. A client closes by
 * cancelling (unwritten frames are dropped); a server ends the call with OK after flushing.
 */

import type { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { MAX_MESSAGE_BYTES, type StreamFrame } from "../wire.ts";
import * as codec from "./codec.ts";
import type { FrameConn, FrameHandlers } from "./transport.ts";

/** A SyncStream call as either side sees it; bytes in and out, decoded here. */
export type DuplexCall =
  | grpc.ClientDuplexStream<Buffer, Buffer>
  | grpc.ServerDuplexStream<Buffer, Buffer>;

/** What a stream tells its transport: a refused frame, and that it is gone. */
export interface ConnHooks {
  /** A frame could not be decoded (the stream is then closed). */
  malformed(detail: string): void;
  /** The stream ended, for whatever reason; called once, before `onClose`. */
  done(conn: GrpcFrameConn): void;
}

/** One end of a SyncStream call, client or server side. */
export class GrpcFrameConn implements FrameConn {
  #call: DuplexCall;
  #hooks: ConnHooks;
  #handlers: FrameHandlers | null = null;
  #closedWith: string | null = null;

  /** Wraps `call`; frames are read only once `listen` is called. */
  constructor(call: DuplexCall, hooks: ConnHooks) {
    this.#call = call;
    this.#hooks = hooks;
    // Attached at once so an early error never goes unhandled; 'data' waits for `listen`.
    call.on("error", (e: Error) => this.#end(message(e), null));
    call.on("end", () => this.#end("peer closed", null));
    call.on("close", () => this.#end("closed", null));
    call.on("status", (s: grpc.StatusObject) => this.#end(`status ${grpc.status[s.code]}`, null));
    call.on("cancelled", () => this.#end("cancelled by peer", null));
  }

  /** The peer's socket address. */
  get remote(): string {
    return this.#call.getPeer();
  }

  /** Encodes and writes `frame`; false when grpc-js's buffer is full or the stream is closed. */
  send(frame: StreamFrame): boolean {
    if (this.#closedWith !== null) return false;
    const bytes = codec.encodeFrame(frame);
    if (bytes.length <= MAX_MESSAGE_BYTES) return this.#call.write(bytes);
    this.#end(`refused to send a ${bytes.length}-byte frame (max ${MAX_MESSAGE_BYTES})`, null);
    return false;
  }

  /** Starts reading; fires `onClose` (asynchronously) if the stream already ended. */
  listen(handlers: FrameHandlers): void {
    if (this.#handlers) throw new Error("FrameConn.listen called twice");
    this.#handlers = handlers;
    const closed = this.#closedWith;
    if (closed !== null) return queueMicrotask(() => handlers.onClose(closed));
    this.#call.on("drain", () => this.#closedWith === null && handlers.onDrain());
    this.#call.on("data", (b: Buffer) => {
      if (this.#closedWith !== null) return;
      const frame = codec.decodeFrame(b);
      if (frame.ok) return handlers.onFrame(frame.value);
      this.#hooks.malformed(`frame from ${this.remote}: ${frame.detail}`);
      this.#end(`malformed frame: ${frame.detail}`, frame.detail);
    });
  }

  /** Ends the stream; frames not yet written are dropped on the client side. */
  close(): void {
    this.#end("closed locally", null);
  }

  /** Ends the call once: a client cancels, a server sends OK (or INVALID_ARGUMENT). */
  #end(reason: string, invalid: string | null): void {
    if (this.#closedWith !== null) return;
    this.#closedWith = reason;
    this.#hooks.done(this);
    const call = this.#call;
    if ("cancel" in call) call.cancel();
    else if (invalid !== null) {
      call.emit("error", { code: grpc.status.INVALID_ARGUMENT, details: invalid });
    } else if (!call.writableEnded && !call.destroyed) call.end();
    this.#handlers?.onClose(reason);
  }
}

/** A stream that never opened: `listen` reports `reason` as its close. */
export function deadConn(reason: string): FrameConn {
  return {
    remote: "",
    send: () => false,
    close: () => {},
    listen: (h) => queueMicrotask(() => h.onClose(reason)),
  };
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
