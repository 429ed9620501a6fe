/**
 * A raw TCP server for HTTP client tests: each accepted connection is handed to a script that
 * reads requests and writes whatever bytes the test wants (slow heads, truncated bodies, early
 * closes). Counts connections; `close()` closes the listener and every connection and waits for
 * the scripts to end.
 */

const dec = new TextDecoder();
const enc = new TextEncoder();

/** One accepted connection with a request reader. */
export class RawConn {
  readonly conn: Deno.TcpConn;
  /** 0-based index of this connection among the server's. */
  readonly index: number;
  #buf = new Uint8Array(0);

  constructor(conn: Deno.TcpConn, index: number) {
    this.conn = conn;
    this.index = index;
  }

  /** The next request (head and body) as text, or null when the client closed first. */
  async request(): Promise<string | null> {
    for (;;) {
      const text = dec.decode(this.#buf);
      const end = text.indexOf("\r\n\r\n");
      if (end >= 0) {
        const m = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, end));
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (this.#buf.length >= total) {
          const req = dec.decode(this.#buf.subarray(0, total));
          this.#buf = this.#buf.slice(total);
          return req;
        }
      }
      const chunk = new Uint8Array(65536);
      let n: number | null;
      try {
        n = await this.conn.read(chunk);
      } catch {
        return null;
      }
      if (n === null) return null;
      const next = new Uint8Array(this.#buf.length + n);
      next.set(this.#buf);
      next.set(chunk.subarray(0, n), this.#buf.length);
      this.#buf = next;
    }
  }

  /** Writes text (or bytes); false when the connection is gone. */
  async send(data: string | Uint8Array): Promise<boolean> {
    const bytes = typeof data === "string" ? enc.encode(data) : data;
    try {
      let off = 0;
      while (off < bytes.length) off += await this.conn.write(bytes.subarray(off));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Lets the client's pending read take what was sent before more is sent, so the next bytes
   * arrive in a later read: a fixed wait (`ms`, default one turn of the event loop), as nothing
   * tells a server that its peer has read its bytes.
   */
  readTurn(ms = 0): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }

  /** Waits until the client closes (or resets) the connection. */
  async closedByPeer(): Promise<void> {
    const b = new Uint8Array(1024);
    try {
      while ((await this.conn.read(b)) !== null) { /* discard */ }
    } catch { /* reset */ }
  }

  /** Closes this side. */
  close(): void {
    try {
      this.conn.close();
    } catch { /* already closed */ }
  }
}

/** A listening raw server running `script` per connection. */
export class RawServer {
  readonly #listener: Deno.TcpListener;
  readonly #conns: RawConn[] = [];
  readonly #scripts: Promise<void>[] = [];
  readonly #loop: Promise<void>;
  /** Connections accepted so far. */
  accepted = 0;

  constructor(script: (c: RawConn) => Promise<void>) {
    const listener = this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#loop = (async () => {
      try {
        for await (const conn of listener) {
          const c = new RawConn(conn, this.accepted++);
          this.#conns.push(c);
          this.#scripts.push(script(c).catch(() => {}).finally(() => c.close()));
        }
      } catch { /* listener closed */ }
    })();
  }

  /** `http://127.0.0.1:port`. */
  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  /** Closes everything and waits for the scripts. */
  async close(): Promise<void> {
    try {
      this.#listener.close();
    } catch { /* closed */ }
    await this.#loop;
    for (const c of this.#conns) c.close();
    await Promise.all(this.#scripts);
  }
}

/** A complete response with a sized body. */
export function sized(body: string, extra = ""): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${
    enc.encode(body).length
  }\r\n${extra}\r\n${body}`;
}
