/**
 * One accepted connection of a ZMTP server socket (PUB or ROUTER), NULL mechanism. In: a TCP
 * connection a listener accepted; out: the peer's messages (`receive`) and ours, written in
 * order by one writer loop.
 *
 * `accept` does the greeting and READY exchange within a deadline and checks the peer's type
 * (SUB for a PUB, DEALER or REQ for a ROUTER). `receive` reads one message, answering PING with
 * PONG on the way and handing ZMTP 3.1's SUBSCRIBE and CANCEL commands over in 3.0's message form
 * (`parseSubscription` reads both the same). Two ways to send a message already encoded
 * (`encodeMessage`): `offer` queues it unless `sendHighWaterMark` messages are already waiting
 * and says whether it did (a PUB drops what a slow subscriber cannot take, as libzmq's PUB does
 * at its high-water mark); `send` always queues it and resolves once it is written (a ROUTER's
 * replay, which the peer asked for, waits for the peer). `close` cuts the connection, drops the
 * queue and rejects the `send`s waiting; `settled` resolves once the writer loop has ended.
 *
 * Known gap: the high-water mark counts messages, not bytes, as libzmq's does.
 */

import type { Clock } from "../core/clock.ts";
import { ByteReader } from "./byte_reader.ts";
import {
  parseCommand,
  parseErrorReason,
  pongFor,
  subscriptionMessage,
  ZmtpError,
} from "./zmtp_codec.ts";
import {
  closeQuietly,
  errorText,
  handshake,
  type Message,
  type ReadLimits,
  readMessage,
  receiveOn,
  writeAll,
} from "./zmtp_io.ts";

/** The socket types that accept connections. */
export type ServerSocketType = "PUB" | "ROUTER";

/** What an accepted connection accepts and how much it queues. */
export interface ZmtpPeerOptions {
  /** Deadline of the greeting and READY exchange, in ms (default 5000). */
  handshakeTimeoutMs?: number;
  /** Largest message read from the peer, in bytes (default 64 KiB: subscriptions, requests). */
  maxMessageBytes?: number;
  /** Most frames in one message read (default 16). */
  maxFrames?: number;
  /** Messages `offer` lets wait to be written before dropping (default 1000, libzmq's). */
  sendHighWaterMark?: number;
  /** Clock of the handshake deadline. */
  clock: Clock;
}

/** One queued write; `done` settles a `send`. */
interface Pending {
  bytes: Uint8Array;
  done?: { resolve: () => void; reject: (e: unknown) => void };
}

/** The server end of one ZMTP connection. */
export class ZmtpPeer {
  /** PUB or ROUTER. */
  readonly type: ServerSocketType;
  /** The peer's socket type from its READY, e.g. `SUB`. */
  readonly peerType: string;
  /** The peer's `Identity` from its READY ("" when it sent none). */
  readonly identity: string;
  readonly #conn: Deno.Conn;
  readonly #reader: ByteReader;
  readonly #limits: ReadLimits;
  readonly #hwm: number;
  #queue: Pending[] = [];
  #writer: Promise<void> | null = null;
  #receiving = false;
  #closed = false;

  private constructor(
    conn: Deno.Conn,
    reader: ByteReader,
    type: ServerSocketType,
    peer: Record<string, string>,
    opts: ZmtpPeerOptions,
  ) {
    this.#conn = conn;
    this.#reader = reader;
    this.type = type;
    this.peerType = peer["Socket-Type"] ?? "";
    this.identity = peer.Identity ?? "";
    const maxMessageBytes = opts.maxMessageBytes ?? 64 * 1024;
    this.#limits = {
      maxFrameBytes: maxMessageBytes,
      maxMessageBytes,
      maxFrames: opts.maxFrames ?? 16,
    };
    this.#hwm = opts.sendHighWaterMark ?? 1000;
  }

  /**
   * Completes the handshake on `conn` as a `type` socket; rejects with a `ZmtpError` (and closes
   * `conn`): `timeout` past the deadline, `protocol` for a peer that is not ZMTP 3 with NULL
   * security or of a type `type` does not serve, `peer_error` when it sent ERROR, `io` else.
   */
  static async accept(
    conn: Deno.Conn,
    type: ServerSocketType,
    opts: ZmtpPeerOptions,
  ): Promise<ZmtpPeer> {
    const clock = opts.clock;
    const timeoutMs = opts.handshakeTimeoutMs ?? 5000;
    let timedOut = false;
    const cancelTimer = clock.after(timeoutMs, () => {
      timedOut = true;
      closeQuietly(conn);
    });
    try {
      (conn as Deno.TcpConn).setNoDelay?.(true);
      const reader = new ByteReader(conn);
      const h = await handshake(conn, reader, type);
      return new ZmtpPeer(conn, reader, type, h.peerProps, opts);
    } catch (e) {
      closeQuietly(conn);
      if (timedOut) {
        throw new ZmtpError("timeout", `ZMTP handshake did not finish within ${timeoutMs} ms`);
      }
      if (e instanceof ZmtpError) throw e;
      throw new ZmtpError("io", `ZMTP handshake failed: ${errorText(e)}`, { cause: e });
    } finally {
      cancelTimer();
    }
  }

  /** Whether `close` was called or the connection failed. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Messages queued and not yet written. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * The peer's next message, or null once the connection ended or `close` was called; rejects
   * with a `ZmtpError` for a peer out of protocol (the connection is then closed). One call at a
   * time.
   */
  async receive(): Promise<Message | null> {
    if (this.#receiving) throw new Error("ZmtpPeer.receive is already pending");
    if (this.#closed) return null;
    this.#receiving = true;
    try {
      const read = () => readMessage(this.#reader, this.#limits, (b) => this.#onCommand(b));
      return await receiveOn(this, read);
    } finally {
      this.#receiving = false;
    }
  }

  /**
   * Queues the encoded message `bytes` unless `sendHighWaterMark` messages are waiting already;
   * whether it was queued (never when closed).
   */
  offer(bytes: Uint8Array): boolean {
    if (this.#closed || this.#queue.length >= this.#hwm) return false;
    this.#push({ bytes });
    return true;
  }

  /** Queues the encoded message `bytes`, whatever is waiting; resolves once it is written. */
  send(bytes: Uint8Array): Promise<void> {
    if (this.#closed) {
      return Promise.reject(new ZmtpError("closed", `the ${this.type} connection is closed`));
    }
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#push({ bytes, done: { resolve, reject } });
    return promise;
  }

  /** Closes the connection, drops what is queued and rejects waiting `send`s. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeQuietly(this.#conn);
    const dropped = this.#queue;
    this.#queue = [];
    const why = new ZmtpError("closed", `the ${this.type} connection was closed`);
    for (const p of dropped) p.done?.reject(why);
  }

  /** Resolves once the writer loop has ended (after `close`, its last write has failed). */
  async settled(): Promise<void> {
    await this.#writer;
  }

  #push(p: Pending): void {
    this.#queue.push(p);
    this.#writer ??= this.#write();
  }

  /** Writes the queue in order until it is empty or the connection fails. */
  async #write(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const p = this.#queue[0];
        try {
          await writeAll(this.#conn, p.bytes);
        } catch (e) {
          const closed = this.#closed;
          this.close();
          p.done?.reject(
            new ZmtpError(
              closed ? "closed" : "io",
              `writing to the ${this.peerType} peer: ${errorText(e)}`,
              {
                cause: e,
              },
            ),
          );
          return;
        }
        this.#queue.shift();
        p.done?.resolve();
      }
    } finally {
      this.#writer = null;
    }
  }

  /** PING is answered; SUBSCRIBE and CANCEL surface as messages; ERROR fails the connection. */
  async #onCommand(body: Uint8Array): Promise<Message | null> {
    const cmd = parseCommand(body);
    if (cmd.name === "PING") await this.send(pongFor(cmd.data));
    else if (cmd.name === "ERROR") {
      throw new ZmtpError("peer_error", `peer sent ERROR: ${parseErrorReason(cmd.data)}`);
    } else if (this.type === "PUB") return subscriptionMessage(cmd);
    return null;
  }
}
