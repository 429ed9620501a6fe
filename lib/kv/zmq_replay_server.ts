/**
 * The engines' KV-event replay service on a ZeroMQ ROUTER that binds: the server side of
 * `replay.ts`. In: a DEALER's (or REQ's) request `["", start seq as 8 bytes big-endian]`; out:
 * one `["", seq, payload]` per batch the publisher still holds from `start` on, ascending, then
 * the end marker `["", -1 as 8 bytes, ""]`, as vLLM's and SGLang's `ZmqEventPublisher` answer.
 * A request of another shape is ignored, as theirs ignore it. Several requests on one connection
 * are answered in turn; an answer waits for the peer to take it (it asked for it) rather than
 * dropping, and ends when the peer leaves.
 */

import { encodeMessage } from "./zmtp_codec.ts";
import type { ZmtpPeer } from "./zmtp_peer.ts";
import { ZmtpServer, type ZmtpServerOptions } from "./zmtp_server.ts";

/** The batches held from sequence number `from` on, ascending, as `[seq, payload]`. */
export type ReplaySource = (from: number) => readonly (readonly [number, Uint8Array])[];

const EMPTY = new Uint8Array(0);
/** The end marker's sequence frame: -1 as a signed 8-byte integer. */
const END_SEQ = new Uint8Array(8).fill(0xff);

/** The 8-byte big-endian frame of sequence number `seq`. */
export function seqFrame(seq: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(seq));
  return b;
}

/** A bound replay ROUTER. */
export class ZmqReplayServer {
  readonly #server: ZmtpServer;
  readonly #source: ReplaySource;
  readonly #watchers = new Set<(from: number) => void>();

  /** Binds at once (`opts.port` 0 picks a free port) and answers from `source`. */
  constructor(opts: ZmtpServerOptions, source: ReplaySource) {
    this.#source = source;
    this.#server = new ZmtpServer("ROUTER", opts, (peer) => this.#serve(peer));
  }

  /** The bound port. */
  get port(): number {
    return this.#server.port;
  }

  /** `tcp://host:port` of the bound address. */
  get endpoint(): string {
    return this.#server.endpoint;
  }

  /** Calls `listener` with the start of each replay once it is answered; returns its removal. */
  watch(listener: (from: number) => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /** Stops listening and disconnects every peer; resolves once all is closed. */
  close(): Promise<void> {
    return this.#server.close();
  }

  async #serve(peer: ZmtpPeer): Promise<void> {
    for (;;) {
      const msg = await peer.receive();
      if (msg === null) return;
      if (msg.length !== 2 || msg[0].length !== 0 || msg[1].length !== 8) continue;
      const wide = new DataView(msg[1].buffer, msg[1].byteOffset, 8).getBigUint64(0);
      const from = wide > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(wide);
      for (const [seq, payload] of this.#source(from)) {
        await peer.send(encodeMessage([EMPTY, seqFrame(seq), payload]));
      }
      await peer.send(encodeMessage([EMPTY, END_SEQ, EMPTY]));
      for (const w of this.#watchers) w(from);
    }
  }
}
