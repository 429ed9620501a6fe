/**
 * A ZMTP 3.x client socket over one TCP connection (`Deno.connect`), NULL mechanism: SUB (to
 * read an engine's KV-event publisher) and DEALER (to ask its replay ROUTER). In: a
 * `tcp://host:port` endpoint; out: multipart messages as arrays of frames.
 *
 * `connect` does the greeting and READY exchange within a deadline and checks the peer's
 * socket type. `receive` reads one message, answering PING with PONG on the way; frames and
 * messages past the configured limits are refused before their bodies are read (the socket is
 * then closed: a stream cut mid-frame cannot be resynchronised). `close` ends a pending
 * `receive` at once (it resolves null). Rejections are `ZmtpError`s.
 *
 * Known gaps: one peer per socket and no reconnection here (the subscriber reconnects); no
 * CURVE or PLAIN security; commands are handled only while a `receive` is pending, so a DEALER
 * nobody reads from leaves a peer's PING unanswered (engines' sockets send none).
 */

import type { Clock } from "../core/clock.ts";
import { ByteReader } from "./byte_reader.ts";
import { parseZmqEndpoint } from "./endpoint.ts";
import {
  encodeMessage,
  encodePing,
  encodeSubscribe,
  parseCommand,
  parseErrorReason,
  pongFor,
  ZmtpError,
} from "./zmtp_codec.ts";
import {
  closeQuietly,
  errorText,
  handshake,
  type Message,
  readMessage,
  receiveOn,
  writeAll,
} from "./zmtp_io.ts";

export { ZmtpError, type ZmtpErrorCode } from "./zmtp_codec.ts";
export type { Message } from "./zmtp_io.ts";

/** The socket types this client speaks. */
export type SocketType = "SUB" | "DEALER";

/** How a socket connects and what it accepts. */
export interface ZmtpOptions {
  /** Deadline for TCP connect, greeting and READY together, in ms (default 5000). */
  handshakeTimeoutMs?: number;
  /** Largest frame body accepted, in bytes (default 16 MiB). */
  maxFrameBytes?: number;
  /** Largest message accepted (its frame bodies added up), in bytes (default 16 MiB). */
  maxMessageBytes?: number;
  /** Most frames in one message (default 16; KV events use 3). */
  maxFrames?: number;
  /** Clock of the handshake deadline and of `lastReceivedAt`. */
  clock: Clock;
  /** Aborts connecting and the handshake (not the socket once connected; `close` does that). */
  signal?: AbortSignal;
}

const MIB = 1024 * 1024;
const encoder = new TextEncoder();

/** A connected ZMTP socket (SUB or DEALER) over one TCP connection. */
export class ZmtpSocket {
  /** SUB or DEALER. */
  readonly type: SocketType;
  #peerType = "";
  #peerVersion = "";
  readonly #conn: Deno.Conn;
  readonly #reader: ByteReader;
  readonly #clock: Clock;
  readonly #maxFrameBytes: number;
  readonly #maxMessageBytes: number;
  readonly #maxFrames: number;
  #writing: Promise<void> = Promise.resolve();
  #receiving = false;
  #closed = false;
  #lastReceivedAt: number;

  private constructor(conn: Deno.Conn, type: SocketType, opts: ZmtpOptions) {
    this.#conn = conn;
    this.type = type;
    this.#clock = opts.clock;
    this.#maxFrameBytes = opts.maxFrameBytes ?? 16 * MIB;
    this.#maxMessageBytes = opts.maxMessageBytes ?? 16 * MIB;
    this.#maxFrames = opts.maxFrames ?? 16;
    this.#lastReceivedAt = this.#clock.now();
    this.#reader = new ByteReader({
      read: async (p) => {
        const n = await conn.read(p);
        if (n !== null) this.#lastReceivedAt = this.#clock.now();
        return n;
      },
    });
  }

  /**
   * Connects to `endpoint` (`tcp://host:port`) as `type` and completes the handshake; rejects
   * with a `ZmtpError`: `timeout` past the deadline, `protocol` for a peer that is not ZMTP 3
   * with NULL security or of a type `type` cannot talk to, `peer_error` when the peer sent
   * ERROR, `closed` when `signal` aborted, `io` when the connection failed.
   */
  static async connect(
    type: SocketType,
    endpoint: string,
    opts: ZmtpOptions,
  ): Promise<ZmtpSocket> {
    const { hostname, port } = parseZmqEndpoint(endpoint);
    const clock = opts.clock;
    const timeoutMs = opts.handshakeTimeoutMs ?? 5000;
    if (opts.signal?.aborted) {
      throw new ZmtpError("closed", `connecting to ${endpoint} was aborted`);
    }
    const abort = new AbortController();
    let timedOut = false;
    let conn: Deno.Conn | null = null;
    const stop = () => {
      abort.abort();
      closeQuietly(conn);
    };
    const cancelTimer = clock.after(timeoutMs, () => {
      timedOut = true;
      stop();
    });
    opts.signal?.addEventListener("abort", stop, { once: true });
    try {
      conn = await Deno.connect({ hostname, port, signal: abort.signal });
      if (abort.signal.aborted) throw new ZmtpError("closed", "aborted");
      (conn as Deno.TcpConn).setNoDelay(true);
      const socket = new ZmtpSocket(conn, type, opts);
      await socket.#handshake();
      return socket;
    } catch (e) {
      closeQuietly(conn);
      if (timedOut) {
        throw new ZmtpError(
          "timeout",
          `ZMTP handshake with ${endpoint} did not finish within ${timeoutMs} ms`,
        );
      }
      if (opts.signal?.aborted) {
        throw new ZmtpError("closed", `connecting to ${endpoint} was aborted`);
      }
      if (e instanceof ZmtpError) {
        throw new ZmtpError(e.code, `${endpoint}: ${e.message}`, { cause: e });
      }
      throw new ZmtpError("io", `connecting to ${endpoint}: ${errorText(e)}`, { cause: e });
    } finally {
      cancelTimer();
      opts.signal?.removeEventListener("abort", stop);
    }
  }

  /** The peer's socket type from its READY, e.g. `PUB`. */
  get peerType(): string {
    return this.#peerType;
  }

  /** The peer's ZMTP version from its greeting, e.g. `3.1`. */
  get peerVersion(): string {
    return this.#peerVersion;
  }

  /** Whether `close` was called or the connection failed. */
  get closed(): boolean {
    return this.#closed;
  }

  /** When bytes last arrived from the peer, on the socket's clock (for liveness checks). */
  get lastReceivedAt(): number {
    return this.#lastReceivedAt;
  }

  /** SUB only: asks the publisher for messages whose first frame starts with `prefix`. */
  subscribe(prefix: Uint8Array | string = ""): Promise<void> {
    if (this.type !== "SUB") throw new TypeError(`subscribe on a ${this.type} socket`);
    return this.#write(
      encodeSubscribe(typeof prefix === "string" ? encoder.encode(prefix) : prefix),
    );
  }

  /** SUB only: cancels one subscription to `prefix` (the others, and other prefixes', stay). */
  unsubscribe(prefix: Uint8Array | string = ""): Promise<void> {
    if (this.type !== "SUB") throw new TypeError(`unsubscribe on a ${this.type} socket`);
    return this.#write(
      encodeSubscribe(typeof prefix === "string" ? encoder.encode(prefix) : prefix, false),
    );
  }

  /** DEALER only: sends one multipart message (strings as UTF-8). */
  send(parts: readonly (Uint8Array | string)[]): Promise<void> {
    if (this.type !== "DEALER") throw new TypeError(`send on a ${this.type} socket`);
    if (parts.length === 0) throw new TypeError("a message needs at least one frame");
    return this.#write(
      encodeMessage(parts.map((p) => typeof p === "string" ? encoder.encode(p) : p)),
    );
  }

  /** Sends a PING (ZMTP 3.1; libzmq answers PONG), so an idle but live peer shows activity. */
  ping(): Promise<void> {
    return this.#write(encodePing());
  }

  /**
   * The next message (its frames are arrays of their own), or null when the peer closed the
   * connection or `close` was called. One call at a time.
   */
  async receive(): Promise<Message | null> {
    if (this.#receiving) throw new Error("ZmtpSocket.receive is already pending");
    if (this.#closed) return null;
    this.#receiving = true;
    try {
      const limits = {
        maxFrameBytes: this.#maxFrameBytes,
        maxMessageBytes: this.#maxMessageBytes,
        maxFrames: this.#maxFrames,
      };
      const read = () => readMessage(this.#reader, limits, (b) => this.#onCommand(b));
      return await receiveOn(this, read);
    } finally {
      this.#receiving = false;
    }
  }

  /** Closes the connection; a pending `receive` resolves null, later sends reject. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeQuietly(this.#conn);
  }

  /** Greeting and READY both ways; sets the peer's type and version. */
  async #handshake(): Promise<void> {
    // A DEALER's empty Identity lets a ROUTER pick one for it, as libzmq's DEALER does.
    const props: Record<string, string> = this.type === "DEALER" ? { Identity: "" } : {};
    const h = await handshake(this.#conn, this.#reader, this.type, props);
    this.#peerType = h.peerType;
    this.#peerVersion = h.version;
  }

  /** PING is answered; ERROR fails the socket; anything else (PONG included) is ignored. */
  async #onCommand(body: Uint8Array): Promise<null> {
    const cmd = parseCommand(body);
    if (cmd.name === "PING") await this.#write(pongFor(cmd.data));
    else if (cmd.name === "ERROR") {
      throw new ZmtpError("peer_error", `peer sent ERROR: ${parseErrorReason(cmd.data)}`);
    }
    return null;
  }

  /** Queues `bytes` behind earlier writes, so frames of two sends never interleave. */
  #write(bytes: Uint8Array): Promise<void> {
    if (this.#closed) {
      return Promise.reject(new ZmtpError("closed", `the ${this.type} socket is closed`));
    }
    const done = this.#writing.then(async () => {
      try {
        await writeAll(this.#conn, bytes);
      } catch (e) {
        const closed = this.#closed;
        this.close();
        throw new ZmtpError(
          closed ? "closed" : "io",
          `writing to the ${this.peerType} peer: ${errorText(e)}`,
          {
            cause: e,
          },
        );
      }
    });
    this.#writing = done.catch(() => {});
    return done;
  }
}
