/**
 * Asks an engine's replay endpoint for missed batches. In: the ROUTER's endpoint and the range
 * `from`..`to`; out: the batches of that range the publisher still buffers, as `[seq, payload]`
 * in ascending order (fewer than asked when its buffer has moved past some).
 *
 * The engines' protocol: a DEALER sends `["", start seq as 8 bytes big-endian]`; the ROUTER
 * answers one `["", seq, payload]` per buffered batch from `start` on, then the end marker
 * `["", -1 as 8 bytes, ""]`. We stop reading once `to` arrived (the rest reach us on the PUB
 * anyway) and close the connection: one connection per gap, as gaps are rare.
 */

import type { Clock } from "../core/clock.ts";
import type { Message, SocketType, ZmtpOptions } from "./zmtp.ts";
import { ZmtpError } from "./zmtp_codec.ts";

/** What the subscriber and the replay need of a socket; `ZmtpSocket` is the real one. */
export interface KvSocket {
  /** SUB: subscribes to a topic prefix. */
  subscribe(prefix: string): Promise<void>;
  /** DEALER: sends one multipart message. */
  send(parts: readonly Uint8Array[]): Promise<void>;
  /** The next message, or null once the connection ended. */
  receive(): Promise<Message | null>;
  /** Asks the peer for a PONG (liveness). */
  ping(): Promise<void>;
  /** When bytes last arrived, on the clock the socket was dialled with. */
  readonly lastReceivedAt: number;
  /** Closes the connection; a pending `receive` resolves null. */
  close(): void;
}

/** Opens a socket of `type` to `endpoint` (handshake done). */
export type Dial = (type: SocketType, endpoint: string, opts: ZmtpOptions) => Promise<KvSocket>;

/** A replay request. */
export interface ReplayRequest {
  /** How to open the DEALER. */
  dial: Dial;
  /** The replay ROUTER's endpoint. */
  endpoint: string;
  /** First missed sequence number. */
  from: number;
  /** Last missed sequence number. */
  to: number;
  /** Deadline for connecting and the whole answer, in ms. */
  timeoutMs: number;
  /** Clock of the deadline (and of the DEALER). */
  clock: Clock;
  /** Socket options (limits); its `signal` also stops the replay. */
  zmtp?: Omit<ZmtpOptions, "clock">;
}

/** The end marker's sequence frame: -1 as a signed 8-byte integer. */
const END_SEQ = 0xffff_ffff_ffff_ffffn;

/**
 * The buffered batches of `from`..`to`, ascending; rejects with a `ZmtpError` when the
 * endpoint cannot be reached, answers out of protocol, or misses the deadline.
 */
export async function requestReplay(req: ReplayRequest): Promise<[number, Uint8Array][]> {
  const clock = req.clock;
  const abort = new AbortController();
  const outer = req.zmtp?.signal;
  let dealer: KvSocket | null = null;
  const onAbort = () => {
    abort.abort();
    dealer?.close();
  };
  outer?.addEventListener("abort", onAbort, { once: true });
  let timedOut = false;
  const cancelTimer = clock.after(req.timeoutMs, () => {
    timedOut = true;
    abort.abort();
    dealer?.close();
  });
  try {
    dealer = await req.dial("DEALER", req.endpoint, {
      ...req.zmtp,
      clock,
      handshakeTimeoutMs: Math.min(req.timeoutMs, req.zmtp?.handshakeTimeoutMs ?? Infinity),
      signal: abort.signal,
    });
    if (abort.signal.aborted) throw new ZmtpError("closed", "replay stopped");
    const start = new Uint8Array(8);
    new DataView(start.buffer).setBigUint64(0, BigInt(req.from));
    await dealer.send([new Uint8Array(0), start]);
    const got: [number, Uint8Array][] = [];
    for (;;) {
      const msg = await dealer.receive();
      if (msg === null) {
        if (timedOut) break;
        throw new ZmtpError("closed", `${req.endpoint} closed the replay before its end marker`);
      }
      if (msg.length !== 3 || msg[0].length !== 0 || msg[1].length !== 8) {
        throw new ZmtpError(
          "protocol",
          `${req.endpoint} answered a replay with ${msg.length} frames, not ["", seq, payload]`,
        );
      }
      const seq = new DataView(msg[1].buffer, msg[1].byteOffset, 8).getBigUint64(0);
      if (seq === END_SEQ) return got;
      const n = Number(seq);
      if (n >= req.from && n <= req.to && (got.length === 0 || n > got[got.length - 1][0])) {
        got.push([n, msg[2]]);
      }
      if (n >= req.to) return got;
    }
    throw new ZmtpError("timeout", `replay from ${req.endpoint} took over ${req.timeoutMs} ms`);
  } catch (e) {
    if (timedOut) {
      throw new ZmtpError("timeout", `replay from ${req.endpoint} took over ${req.timeoutMs} ms`);
    }
    throw e;
  } finally {
    cancelTimer();
    outer?.removeEventListener("abort", onAbort);
    dealer?.close();
  }
}
