/**
 * Clients that misbehave, on raw TCP (`Deno.connect`) so the bench decides exactly when bytes are
 * read and written: one that reads its stream slowly, one that leaves mid-stream, one that sends
 * its body slowly. Each sends `connection: close` (the end of the connection is the end of the
 * answer), has a deadline after which it counts as hung, and never throws.
 */

import type { Outcome } from "./load.ts";

/** How a misbehaving client's request ended: as `Outcome`, or `left` (it closed on purpose). */
export type BadOutcome = Outcome | "left";

/** Where to send and how long to wait. */
export interface BadClientOptions {
  /** Gateway host (127.0.0.1). */
  host: string;
  port: number;
  /** ms before the request counts as hung. */
  deadlineMs: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A streaming chat request's bytes, with `x-faulty-*` headers shaping the worker's stream. */
function streamRequest(o: BadClientOptions, shape: Record<string, number>): Uint8Array {
  const body = JSON.stringify({
    model: "sim-model",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
  });
  const extra = Object.entries(shape).map(([k, v]) => `x-faulty-${k}: ${v}\r\n`).join("");
  return enc.encode(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${o.host}:${o.port}\r\n` +
      `content-type: application/json\r\ncontent-length: ${enc.encode(body).length}\r\n` +
      `connection: close\r\n${extra}\r\n${body}`,
  );
}

/** The status of a response whose first bytes are `text`, or 0. */
function statusOf(text: string): number {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Classifies what a client read, ending at EOF (or not, `eof` false). */
function classify(text: string, eof: boolean, timedOut: boolean): BadOutcome {
  const status = statusOf(text);
  if (timedOut) return "hung";
  if (status === 0) return "net";
  if (status < 200 || status > 299) return `${status}`;
  if (text.includes("event: error")) return "sse-error";
  if (/content-type: text\/event-stream/i.test(text)) {
    return text.includes("data: [DONE]") && eof ? "ok" : "cut";
  }
  const body = text.slice(text.indexOf("\r\n\r\n") + 4);
  try {
    JSON.parse(body);
    return "ok";
  } catch {
    return "cut";
  }
}

/** Runs `fn` on a fresh connection, closing it at the end or at the deadline. */
async function withConn(
  o: BadClientOptions,
  fn: (c: Deno.TcpConn, deadline: AbortSignal) => Promise<BadOutcome>,
): Promise<BadOutcome> {
  const deadline = AbortSignal.timeout(o.deadlineMs);
  let conn: Deno.TcpConn;
  try {
    conn = await Deno.connect({ hostname: o.host, port: o.port });
  } catch {
    return "net";
  }
  const close = () => {
    try {
      conn.close();
    } catch { /* closed already */ }
  };
  deadline.addEventListener("abort", close, { once: true });
  try {
    return await fn(conn, deadline);
  } catch {
    return deadline.aborted ? "hung" : "net";
  } finally {
    deadline.removeEventListener("abort", close);
    close();
  }
}

/** Reads to EOF, `size` bytes at a time, `gapMs` between reads. */
async function readAll(c: Deno.TcpConn, size: number, gapMs: number, deadline: AbortSignal) {
  const buf = new Uint8Array(size);
  let text = "";
  for (;;) {
    let n: number | null;
    try {
      n = await c.read(buf);
    } catch {
      return { text, eof: false };
    }
    if (n === null) return { text, eof: !deadline.aborted };
    text += dec.decode(buf.subarray(0, n), { stream: true });
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
}

/**
 * Asks for a stream of `tokens` events of ~`pad` bytes each sent at once, and reads it `size`
 * bytes every `gapMs`.
 */
export function slowReader(
  o: BadClientOptions,
  tokens: number,
  pad: number,
  size: number,
  gapMs: number,
): Promise<BadOutcome> {
  return withConn(o, async (c, deadline) => {
    await c.write(streamRequest(o, { tokens, "token-ms": 0, pad }));
    const { text, eof } = await readAll(c, size, gapMs, deadline);
    return classify(text, eof, deadline.aborted);
  });
}

/** Asks for a long paced stream and closes the connection after its `events`-th event. */
export function leaver(o: BadClientOptions, events: number): Promise<BadOutcome> {
  return withConn(o, async (c, deadline) => {
    await c.write(streamRequest(o, { tokens: 200, "token-ms": 40 }));
    const buf = new Uint8Array(16_384);
    let text = "";
    while ((text.match(/\ndata: /g)?.length ?? 0) < events) {
      const n = await c.read(buf);
      if (n === null) return classify(text, true, deadline.aborted);
      text += dec.decode(buf.subarray(0, n), { stream: true });
      if (statusOf(text) !== 200 && text.includes("\r\n\r\n")) return `${statusOf(text)}`;
    }
    return "left";
  });
}

/** Sends a whole chat request's body in `pieces` pieces `gapMs` apart, then reads the answer. */
export function slowBody(o: BadClientOptions, pieces: number, gapMs: number): Promise<BadOutcome> {
  return withConn(o, async (c, deadline) => {
    const body = enc.encode(JSON.stringify({
      model: "sim-model",
      messages: [{ role: "user", content: "hi, slowly ".repeat(8) }],
      max_tokens: 4,
    }));
    await c.write(enc.encode(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${o.host}:${o.port}\r\n` +
        `content-type: application/json\r\ncontent-length: ${body.length}\r\n` +
        `connection: close\r\n\r\n`,
    ));
    const step = Math.ceil(body.length / pieces);
    for (let at = 0; at < body.length; at += step) {
      await new Promise((r) => setTimeout(r, gapMs));
      await c.write(body.subarray(at, at + step));
    }
    const { text, eof } = await readAll(c, 65_536, 0, deadline);
    return classify(text, eof, deadline.aborted);
  });
}
