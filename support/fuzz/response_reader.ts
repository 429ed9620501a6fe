/**
 * Reads HTTP/1.1 responses off a raw connection as they arrive, for the framing fuzzer: each
 * complete response (status, `x-request-id`) as soon as its last byte is in, interim 1xx
 * answers skipped, bodies framed by `content-length`, chunked coding or the close. A response
 * that is not HTTP/1.1 as the front must write it is reported as malformed, not guessed at.
 * `next(ms)` waits for the next response, the close, or `ms` of silence, whichever is first.
 */

/** One response as read. */
export interface ReadResponse {
  status: number;
  /** Its `x-request-id`, or "". */
  requestId: string;
}

/** What `next` came to. */
export type ReadEvent =
  | { kind: "response"; response: ReadResponse }
  | { kind: "closed" }
  | { kind: "quiet" }
  | { kind: "malformed"; detail: string };

/**
 * Bytes as Latin-1, one character per byte, as header values travel (`TextDecoder("latin1")` is
 * windows-1252, which turns 0x80-0x9f into other characters).
 */
function dec(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 4096) {
    s += String.fromCharCode(...b.subarray(i, Math.min(b.length, i + 4096)));
  }
  return s;
}

/** A response reader over one connection. */
export class ResponseReader {
  readonly #conn: Deno.Conn;
  #buf = new Uint8Array(0);
  #eof = false;
  #reading: Promise<void> | null = null;
  readonly #chunk = new Uint8Array(65536);

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /**
   * The next response, the close, or `quiet` after `ms` without either: real time, the no-hang
   * oracle's bound on a front that runs on the system clock.
   */
  async next(ms: number): Promise<ReadEvent> {
    for (;;) {
      const parsed = this.#parse();
      if (parsed) return parsed;
      if (this.#eof) {
        return this.#buf.length === 0
          ? { kind: "closed" }
          : { kind: "malformed", detail: `closed inside a response: ${this.#preview()}` };
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const quiet = new Promise<"quiet">((r) => timer = setTimeout(() => r("quiet"), ms));
      const got = await Promise.race([this.#read(), quiet]);
      clearTimeout(timer);
      if (got === "quiet") return { kind: "quiet" };
    }
  }

  /** One read into the buffer (the pending one if a wait gave up on it). */
  #read(): Promise<void> {
    this.#reading ??= this.#conn.read(this.#chunk).then((n) => {
      this.#reading = null;
      if (n === null) this.#eof = true;
      else {
        const next = new Uint8Array(this.#buf.length + n);
        next.set(this.#buf);
        next.set(this.#chunk.subarray(0, n), this.#buf.length);
        this.#buf = next;
      }
    }, () => {
      this.#reading = null;
      this.#eof = true;
    });
    return this.#reading;
  }

  /** Settles once the pending read does (after the connection is closed: at once). */
  async settle(): Promise<void> {
    await this.#reading;
  }

  #preview(): string {
    return JSON.stringify(dec(this.#buf.subarray(0, 80)));
  }

  /** A complete response at the start of the buffer (consumed), or null. */
  #parse(): ReadEvent | null {
    const b = this.#buf;
    const end = indexOf(b, "\r\n\r\n");
    if (end < 0) {
      if (
        b.length > 0 && !"HTTP/1.1 ".startsWith(dec(b.subarray(0, 9)).slice(0, b.length))
      ) {
        return this.#malformed("not a status line");
      }
      return null;
    }
    const lines = dec(b.subarray(0, end)).split("\r\n");
    const m = /^HTTP\/1\.1 (\d{3}) [^\r\n]*$/.exec(lines[0]);
    if (!m) return this.#malformed("bad status line");
    const status = Number(m[1]);
    const headers = new Map<string, string>();
    for (const l of lines.slice(1)) {
      const c = l.indexOf(":");
      if (c <= 0) return this.#malformed("bad header line");
      // OWS is spaces and tabs only (a latin-1 NBSP, which `trim` drops, is part of the value).
      headers.set(l.slice(0, c).toLowerCase(), l.slice(c + 1).replace(/^[ \t]+|[ \t]+$/g, ""));
    }
    let at = end + 4;
    if (status >= 100 && status < 200) {
      this.#buf = b.slice(at);
      return this.#parse();
    }
    const cl = headers.get("content-length");
    if (headers.get("transfer-encoding") === "chunked") {
      for (;;) {
        const eol = indexOf(b, "\r\n", at);
        if (eol < 0) return null;
        const size = parseInt(dec(b.subarray(at, eol)), 16);
        if (Number.isNaN(size)) return this.#malformed("bad chunk size");
        if (b.length < eol + 2 + size + 2) return null;
        at = eol + 2 + size + 2;
        if (size === 0) break;
      }
    } else if (cl !== undefined) {
      if (!/^\d+$/.test(cl)) return this.#malformed("bad content-length");
      at += Number(cl);
      if (b.length < at) return null;
    } else if (status !== 204 && status !== 304) {
      if (!this.#eof) return null;
      at = b.length;
    }
    this.#buf = b.slice(at);
    return { kind: "response", response: { status, requestId: headers.get("x-request-id") ?? "" } };
  }

  #malformed(why: string): ReadEvent {
    const detail = `${why}: ${this.#preview()}`;
    this.#buf = new Uint8Array(0);
    this.#eof = true;
    return { kind: "malformed", detail };
  }
}

function indexOf(b: Uint8Array, s: string, from = 0): number {
  outer: for (let i = from; i + s.length <= b.length; i++) {
    for (let j = 0; j < s.length; j++) if (b[i + j] !== s.charCodeAt(j)) continue outer;
    return i;
  }
  return -1;
}
