/**
 * A response body read from an `Http1Client` connection: sized, chunked or to the close; `whole`
 * when a sized body is already in the buffer, else `read()` returns what has arrived (chunk
 * framing removed, queued chunks in one array). At its end the connection goes back to the pool,
 * or closes when the response said so or left bytes behind.
 */

import { closedError, type Conn } from "./http1_conn.ts";
import { ChunkedDecoder } from "../http1/chunked.ts";
import { protocolError, type ResponseHead } from "./http1_response.ts";
import { type UpstreamBody, UpstreamError } from "./types.ts";

const EMPTY = new Uint8Array(0);

/** The body of a response on a connection. */
export class Http1Body implements UpstreamBody {
  whole: Uint8Array<ArrayBuffer> | null = null;
  #conn: Conn | null;
  /** Bytes of a sized body still to come; -1: chunked or to the close. */
  #remaining: number;
  readonly #chunks: ChunkedDecoder | null;
  readonly #keepAlive: boolean;
  #ranges: number[] | null = null;

  constructor(conn: Conn, head: ResponseHead, empty: boolean) {
    this.#conn = conn;
    this.#keepAlive = head.keepAlive;
    this.#chunks = !empty && head.chunked ? new ChunkedDecoder(protocolError) : null;
    this.#remaining = empty ? 0 : head.chunked ? -1 : head.length;
    if (this.#remaining === 0) {
      this.whole = EMPTY as Uint8Array<ArrayBuffer>;
      this.#finish();
    } else if (this.#remaining > 0 && conn.end - conn.start >= this.#remaining) {
      this.whole = conn.buf.slice(conn.start, conn.start + this.#remaining);
      conn.start += this.#remaining;
      this.#remaining = 0;
      this.#finish();
    }
  }

  get done(): boolean {
    return this.#conn === null && this.whole === null;
  }

  async read(): Promise<Uint8Array<ArrayBuffer> | null> {
    if (this.whole) {
      const w = this.whole;
      this.whole = null;
      return w.length ? w : null;
    }
    const c = this.#conn;
    if (!c) return null;
    try {
      for (;;) {
        const out = this.#take(c);
        if (out) return out;
        if (!this.#conn) return null; // finished by #take
        if (!(await c.fill())) {
          if (this.#remaining === -1 && !this.#chunks) {
            this.#conn = null;
            c.destroy();
            return null;
          }
          throw new UpstreamError("closed", "worker closed the connection before the body ended");
        }
      }
    } catch (e) {
      this.#conn = null;
      const err = closedError(c, e, "worker body broke off");
      c.destroy();
      throw err;
    }
  }

  /** Payload bytes in the buffer, or null; finishes the body when its end is reached. */
  #take(c: Conn): Uint8Array<ArrayBuffer> | null {
    if (c.start === c.end) return null;
    let out: Uint8Array<ArrayBuffer> | null = null;
    if (this.#chunks) {
      const r = this.#ranges ??= [];
      r.length = 0;
      c.start = this.#chunks.decode(c.buf, c.start, c.end, r);
      if (r.length === 2) out = c.buf.slice(r[0], r[1]);
      else if (r.length > 2) {
        let n = 0;
        for (let i = 0; i < r.length; i += 2) n += r[i + 1] - r[i];
        out = new Uint8Array(n);
        let off = 0;
        for (let i = 0; i < r.length; i += 2) {
          out.set(c.buf.subarray(r[i], r[i + 1]), off);
          off += r[i + 1] - r[i];
        }
      }
      if (this.#chunks.done) this.#finish();
    } else if (this.#remaining > 0) {
      const n = Math.min(this.#remaining, c.end - c.start);
      out = c.buf.slice(c.start, c.start + n);
      c.start += n;
      this.#remaining -= n;
      if (this.#remaining === 0) this.#finish();
    } else {
      out = c.buf.slice(c.start, c.end);
      c.start = c.end;
    }
    return out;
  }

  /** The body is complete: the connection goes back to the pool (or closes). */
  #finish(): void {
    const c = this.#conn;
    if (!c) return;
    this.#conn = null;
    c.served++;
    c.detach();
    // Bytes after the response (no pipelining) mean the stream is out of step: not reused.
    if (!this.#keepAlive || c.start !== c.end) c.destroy();
    else c.pool.client.release(c);
  }

  cancel(): void {
    this.whole = null;
    const c = this.#conn;
    if (!c) return;
    this.#conn = null;
    c.destroy(new UpstreamError("aborted", "worker body cancelled"));
  }
}
