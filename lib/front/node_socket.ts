/**
 * A `node:net` or `node:tls` socket as the front's `FrontSocket` (the `Deno.TcpConn` shape the
 * connections read and write). In: the socket's `data`, `end`, `error` and `close` events. Out:
 * `read` copies what arrived into the caller's buffer, or waits for more; null once the peer
 * ended (or the socket failed) and nothing is left. The socket is paused while 64 KiB wait
 * unread and resumed when a read takes them below 16 KiB: the client is slowed down, not
 * buffered. `write` resolves when the socket has taken the bytes (its callback), so the caller
 * may reuse them; it rejects once the socket is gone. `close` ends the stream (over TLS, a
 * `close_notify` after what is queued) and destroys the socket once that is flushed, or after
 * `CLOSE_FLUSH_MS` when the peer reads nothing.
 */

import type { Socket } from "node:net";
import type { FrontSocket } from "./connection.ts";

/** Unread bytes at which the socket is paused, and below which it is resumed. */
const PAUSE_AT = 64 * 1024;
const RESUME_BELOW = 16 * 1024;

/** How long a closed socket may take to flush what it was still sending. */
const CLOSE_FLUSH_MS = 5000;

/** A node socket read and written as a `FrontSocket`. */
export class NodeSocketConn implements FrontSocket {
  readonly #s: Socket;
  /** Arrived chunks, the first one read from `#offset` on. */
  readonly #chunks: Uint8Array[] = [];
  #offset = 0;
  #unread = 0;
  #paused = false;
  #ended = false;
  #closed = false;
  #error: Error | null = null;
  /** The pending read's wake-up. */
  #wake: (() => void) | null = null;
  /** The client's address, read at the start (a closed socket forgets it). */
  readonly remoteAddr?: Deno.NetAddr;

  /** Wraps a connected socket (a `TLSSocket` after its handshake). */
  constructor(s: Socket) {
    this.#s = s;
    if (s.remoteAddress !== undefined) {
      this.remoteAddr = { transport: "tcp", hostname: s.remoteAddress, port: s.remotePort ?? 0 };
    }
    s.on("data", (chunk: Uint8Array) => {
      this.#chunks.push(chunk);
      this.#unread += chunk.length;
      if (this.#unread >= PAUSE_AT && !this.#paused) {
        this.#paused = true;
        s.pause();
      }
      this.#notify();
    });
    s.on("end", () => {
      this.#ended = true;
      this.#notify();
    });
    // A socket's error must be listened to (an unheard one is thrown); the read reports it.
    s.on("error", (e: Error) => {
      this.#error ??= e;
      this.#notify();
    });
    s.on("close", () => {
      this.#ended = true;
      this.#notify();
    });
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#unread === 0) {
      if (this.#closed) return null;
      if (this.#error) throw this.#error;
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
    let n = 0;
    while (n < p.length && this.#chunks.length > 0) {
      const c = this.#chunks[0];
      const take = Math.min(c.length - this.#offset, p.length - n);
      p.set(c.subarray(this.#offset, this.#offset + take), n);
      n += take;
      this.#offset += take;
      if (this.#offset === c.length) {
        this.#chunks.shift();
        this.#offset = 0;
      }
    }
    this.#unread -= n;
    if (this.#paused && this.#unread < RESUME_BELOW) {
      this.#paused = false;
      this.#s.resume();
    }
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    if (this.#closed || this.#s.destroyed) {
      return Promise.reject(this.#error ?? new Error("socket closed"));
    }
    return new Promise((resolve, reject) => {
      this.#s.write(p, (e?: Error | null) => e ? reject(e) : resolve(p.length));
    });
  }

  setNoDelay(noDelay = true): void {
    this.#s.setNoDelay(noDelay);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#notify();
    endThenDestroy(this.#s);
  }
}

/**
 * Ends `s` (what is queued is flushed, then over TLS a `close_notify`, then FIN) and destroys it
 * once that is done, or after `CLOSE_FLUSH_MS` if the peer does not read.
 */
export function endThenDestroy(s: Socket): void {
  if (s.destroyed) return;
  const timer = setTimeout(() => s.destroy(), CLOSE_FLUSH_MS);
  s.once("close", () => clearTimeout(timer));
  s.end(() => s.destroy());
}
