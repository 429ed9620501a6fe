/**
 * A raw HTTP/1.1 client for server tests: writes whatever bytes the test wants (pipelined
 * requests, a head byte by byte, a body after `100 Continue`) and reads responses off the socket
 * exactly as sent: status, headers, a sized, chunked (decoded, framing kept for checks) or
 * close-delimited body, and whether the server closed the connection.
 */

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One response as read. */
export interface RawResponse {
  status: number;
  /** Headers, names lower-case. */
  headers: Map<string, string>;
  /** The body (chunked: decoded). */
  body: string;
  /** Chunk sizes, for a chunked body. */
  chunks: number[];
}

/** A client connection. */
export class RawClient {
  readonly conn: Deno.TcpConn;
  #buf = new Uint8Array(0);
  /** The server closed the connection. */
  eof = false;

  private constructor(conn: Deno.TcpConn) {
    this.conn = conn;
  }

  static async connect(port: number): Promise<RawClient> {
    return new RawClient(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  /** Writes text or bytes. */
  async send(data: string | Uint8Array): Promise<void> {
    const b = typeof data === "string" ? enc.encode(data) : data;
    let off = 0;
    while (off < b.length) off += await this.conn.write(b.subarray(off));
  }

  async #more(): Promise<boolean> {
    if (this.eof) return false;
    const chunk = new Uint8Array(65536);
    let n: number | null;
    try {
      n = await this.conn.read(chunk);
    } catch {
      n = null;
    }
    if (n === null) {
      this.eof = true;
      return false;
    }
    const next = new Uint8Array(this.#buf.length + n);
    next.set(this.#buf);
    next.set(chunk.subarray(0, n), this.#buf.length);
    this.#buf = next;
    return true;
  }

  /** The next `len` bytes as text (waits for them). */
  async #take(len: number): Promise<string> {
    while (this.#buf.length < len) {
      if (!(await this.#more())) throw new Error("connection closed mid-response");
    }
    const s = dec.decode(this.#buf.subarray(0, len));
    this.#buf = this.#buf.slice(len);
    return s;
  }

  /** The next line without its CRLF. */
  async #line(): Promise<string> {
    for (;;) {
      const i = this.#buf.indexOf(10);
      if (i >= 0) return (await this.#take(i + 1)).replace(/\r?\n$/, "");
      if (!(await this.#more())) throw new Error("connection closed mid-line");
    }
  }

  /** Reads one head (status line and headers). */
  async head(): Promise<{ status: number; headers: Map<string, string> }> {
    const status = Number((await this.#line()).split(" ")[1]);
    const headers = new Map<string, string>();
    for (let l = await this.#line(); l !== ""; l = await this.#line()) {
      const c = l.indexOf(":");
      headers.set(l.slice(0, c).toLowerCase(), l.slice(c + 1).trim());
    }
    return { status, headers };
  }

  /** Reads one whole response; `bodiless` for the answer to a HEAD. */
  async response(bodiless = false): Promise<RawResponse> {
    const { status, headers } = await this.head();
    const chunks: number[] = [];
    let body = "";
    if (bodiless || status === 204 || status === 304) {
      // no body
    } else if (headers.get("transfer-encoding") === "chunked") {
      for (;;) {
        const size = parseInt(await this.#line(), 16);
        if (size === 0) {
          await this.#line();
          break;
        }
        chunks.push(size);
        body += await this.#take(size);
        await this.#line();
      }
    } else if (headers.has("content-length")) {
      body = await this.#take(Number(headers.get("content-length")));
    } else {
      while (await this.#more());
      body = dec.decode(this.#buf);
      this.#buf = new Uint8Array(0);
    }
    return { status, headers, body, chunks };
  }

  /** Resolves true when the server closes the connection with nothing more sent. */
  async closed(): Promise<boolean> {
    while (await this.#more());
    return this.#buf.length === 0;
  }

  close(): void {
    try {
      this.conn.close();
    } catch { /* closed */ }
  }
}
