/**
 * The response side of the own HTTP/1.1 front (`server.ts`): a `Reply` written to the client's
 * socket. Head and a sized body go in one write; a streamed body as chunked frames (each read of
 * the source, everything already queued, in one write, the head with the first bytes and the
 * last chunk with the last), close-delimited for HTTP/1.0 clients; HEAD, 204 and 304 without a
 * body; the framing headers (`content-length`, `transfer-encoding`, `connection`, `date`) are
 * the front's own. Also the plain-text answer to a request refused before the gateway saw it.
 */

import { type Abortable, type ChunkSource, isChunkSource, type Reply } from "../core/http.ts";
import { REASON_PHRASES } from "../core/errors.ts";

const encoder = new TextEncoder();

/** Reason phrases of the status line. */
const REASONS: Record<number, string> = {
  ...REASON_PHRASES,
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No Content",
  301: "Moved Permanently",
  302: "Found",
  304: "Not Modified",
  403: "Forbidden",
  422: "Unprocessable Entity",
  431: "Request Header Fields Too Large",
  499: "Client Closed Request",
  501: "Not Implemented",
  505: "HTTP Version Not Supported",
};

/** Response headers the front writes itself. */
const FRAMING = new Set([
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "date",
]);

let dateSecond = -1;
let dateLine = "";

/** `date: ...\r\n`, rebuilt once a second. */
function dateHeader(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateLine = `date: ${new Date(now).toUTCString()}\r\n`;
  }
  return dateLine;
}

/** `s` as bytes, one per character (header values are Latin-1), then `body`. */
function encodeHead(s: string, body: Uint8Array | null): Uint8Array {
  const size = body ? body.byteLength : 0;
  const out = new Uint8Array(s.length * 3 + size);
  let n = encoder.encodeInto(s, out).written;
  if (n !== s.length) {
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 0xff;
    n = s.length;
  }
  if (body) out.set(body, n);
  return out.subarray(0, n + size);
}

const LAST_CHUNK = encoder.encode("0\r\n\r\n");

/** One chunked frame of `data`, followed by the last chunk when `last`. */
function frame(data: Uint8Array, last: boolean): Uint8Array {
  const size = data.byteLength.toString(16);
  const n = size.length + 4 + data.byteLength;
  const out = new Uint8Array(last ? n + LAST_CHUNK.length : n);
  for (let i = 0; i < size.length; i++) out[i] = size.charCodeAt(i);
  out[size.length] = 13;
  out[size.length + 1] = 10;
  out.set(data, size.length + 2);
  out[n - 2] = 13;
  out[n - 1] = 10;
  if (last) out.set(LAST_CHUNK, n);
  return out;
}

/** Where a reply is written: the client's connection. */
export interface ReplySink {
  /** The client closed its side or a write failed; set here when a write fails. */
  peerGone: boolean;
  /** Writes all of `b`. */
  write(b: Uint8Array): Promise<void>;
}

/** A plain-text `status` answer carrying `message`, after which the connection closes. */
export function errorResponse(status: number, message: string): Uint8Array {
  const body = encoder.encode(message);
  const h = `HTTP/1.1 ${status} ${REASONS[status] ?? ""}\r\n${dateHeader()}` +
    `content-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  return encodeHead(h, body);
}

/**
 * Writes `r` to `conn` (`head`: a HEAD request, no body; `http10`: an HTTP/1.0 client; `keep`:
 * the connection carries another request). The body's source is cancelled if the client is
 * gone or leaves (`gone` fires).
 */
export async function writeReply(
  conn: ReplySink,
  r: Reply,
  head: boolean,
  http10: boolean,
  keep: boolean,
  gone: Abortable,
): Promise<void> {
  const status = r.status;
  let h = `HTTP/1.1 ${status} ${REASONS[status] ?? ""}\r\n${dateHeader()}`;
  const list = r.headers;
  for (let i = 0; i < list.length; i++) {
    if (!FRAMING.has(list[i][0])) h += `${list[i][0]}: ${list[i][1]}\r\n`;
  }
  if (!keep) h += "connection: close\r\n";
  else if (http10) h += "connection: keep-alive\r\n";
  const b = r.body;
  const noBody = status === 204 || status === 304;
  if (b === null || b instanceof Uint8Array) {
    if (!noBody) h += `content-length: ${b ? b.byteLength : 0}\r\n`;
    if (conn.peerGone) return;
    await conn.write(encodeHead(`${h}\r\n`, head || noBody ? null : b));
    return;
  }
  const source = isChunkSource(b) ? b : readerSource(b);
  if (head || noBody || conn.peerGone) {
    source.cancel();
    if (!conn.peerGone) await conn.write(encodeHead(`${h}\r\n`, null));
    return;
  }
  // HTTP/1.0 has no chunked coding: the body ends with the connection.
  const chunked = !http10;
  h += chunked ? "transfer-encoding: chunked\r\n\r\n" : "\r\n";
  const cancel = () => source.cancel();
  gone.on(cancel);
  let pendingHead: Uint8Array | null = encodeHead(h, null);
  let ended = false;
  try {
    while (!ended) {
      const data = await source.read();
      if (conn.peerGone) return;
      if (data === null) break;
      if (data.byteLength === 0) continue;
      // The source's end already arrived: the last chunk leaves with these bytes.
      ended = chunked && source.done === true;
      const out = chunked ? frame(data, ended) : data;
      if (pendingHead) {
        // The head leaves with the first bytes.
        const both = new Uint8Array(pendingHead.length + out.length);
        both.set(pendingHead);
        both.set(out, pendingHead.length);
        pendingHead = null;
        await conn.write(both);
      } else await conn.write(out);
    }
    if (ended) await source.read(); // null: lets the source see its end
    else if (pendingHead) await conn.write(encodeHead(h, chunked ? LAST_CHUNK : null));
    else if (chunked) await conn.write(LAST_CHUNK);
    else conn.peerGone = true; // close-delimited: the connection ends the body
  } catch {
    conn.peerGone = true;
    source.cancel();
  } finally {
    gone.off(cancel);
  }
}

/** A `ReadableStream` read as a chunk source. */
function readerSource(s: ReadableStream<Uint8Array>): ChunkSource {
  const reader = s.getReader();
  return {
    read: async () => {
      const r = await reader.read();
      return r.done ? null : r.value;
    },
    cancel: () => void reader.cancel().catch(() => {}),
  };
}
