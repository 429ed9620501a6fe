/**
 * The SSE relay: chunks reach the client in order with backpressure, a worker stream that breaks
 * becomes an SSE `error` event and a clean end, a client that leaves cancels the worker's body,
 * and `onEnd` runs exactly once with how the stream ended.
 */

import assert from "node:assert/strict";
import {
  bodyStream,
  type RelayEnd,
  sseErrorEvent,
  SseRelay,
} from "../../../lib/proxy/http/relay.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What the fake worker's body does after its scripted chunks. */
type Tail = "close" | Error;

/** A worker body with scripted chunks; records pulls and the cancel reason. */
function upstream(chunks: string[], tail: Tail = "close") {
  let i = 0;
  const cancelled = Promise.withResolvers<unknown>();
  const state = { pulls: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      state.pulls++;
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]));
      else if (tail === "close") c.close();
      else c.error(tail);
    },
    cancel(reason) {
      state.cancelled = true;
      cancelled.resolve(reason);
    },
  }, { highWaterMark: 0 });
  const reader = stream.getReader();
  // The relay reads an `UpstreamBody`-shaped source: next bytes or null, and cancel.
  const source = {
    read: async () => {
      const r = await reader.read();
      return r.done ? null : r.value as Uint8Array<ArrayBuffer>;
    },
    cancel: () => void reader.cancel("relay cancelled").catch(() => {}),
  };
  return { source, state, cancelled: cancelled.promise };
}

/** Reads the first chunk as the proxy does, then builds the relay. */
async function relay(chunks: string[], tail: Tail = "close") {
  const up = upstream(chunks, tail);
  const first = await up.source.read();
  assert.notEqual(first, null);
  const ends: [RelayEnd, unknown][] = [];
  // Read as `Deno.serve` reads it: through `bodyStream`.
  const out = bodyStream(
    new SseRelay(first!, up.source, "http://w1:8000", (how, err) => {
      ends.push([how, err]);
    }),
  );
  return { ...up, out, ends };
}

/** Parses SSE text as a client does (WHATWG rules): dispatched events' type and data. */
function sseEvents(text: string): { event: string; data: string }[] {
  const out: { event: string; data: string }[] = [];
  let event = "";
  let data: string[] = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === "") {
      if (data.length > 0) out.push({ event: event || "message", data: data.join("\n") });
      event = "";
      data = [];
    } else if (line.startsWith("event:")) event = line.slice(6).trimStart();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  return out;
}

async function readAll(s: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const c of s) text += dec.decode(c, { stream: true });
  return text + dec.decode();
}

Deno.test("SseRelay: the first chunk, then the rest in order; onEnd(done) once at the end", async () => {
  const chunks = ["data: a\n\n", "data: b\n\n", "data: c\n\n", "data: [DONE]\n\n"];
  const r = await relay(chunks);
  const reader = r.out.getReader();
  const got: string[] = [];
  for (let i = 0; i < chunks.length; i++) {
    const x = await reader.read();
    assert.equal(x.done, false);
    got.push(dec.decode(x.value));
    assert.deepEqual(r.ends, [], "not ended while chunks are still coming");
  }
  assert.deepEqual(got, chunks);
  assert.equal((await reader.read()).done, true);
  assert.deepEqual(r.ends, [["done", undefined]]);
  assert.equal(r.state.cancelled, false);
});

Deno.test("SseRelay: a stream that ends without data: [DONE] ends with an error event, not cleanly", async () => {
  const r = await relay(["data: a\n\n", "data: b\n\n"]);
  const text = await new Response(r.out).text();
  const events = sseEvents(text);
  assert.deepEqual(events.slice(0, 2).map((e) => e.data), ["a", "b"]);
  assert.equal(events[2].event, "error");
  assert.equal(JSON.parse(events[2].data).error.code, "upstream_stream_truncated");
  assert.deepEqual(r.ends.map(([how]) => how), ["error"]);
});

Deno.test("SseRelay: data: [DONE] split across the last two chunks still ends cleanly", async () => {
  for (const chunks of [["data: a\n\ndata: [DO", "NE]\n\n"], ["data: a\n\n", "data:[DONE]"]]) {
    const r = await relay(chunks);
    assert.equal(await new Response(r.out).text(), chunks.join(""));
    assert.deepEqual(r.ends.map(([how]) => how), ["done"], chunks.join(""));
  }
});

Deno.test("SseRelay: one worker chunk is read per chunk the client takes", async () => {
  const r = await relay(["1", "2", "3", "4"]);
  assert.equal(r.state.pulls, 1, "only the first chunk, read by the caller");
  const reader = r.out.getReader();
  await reader.read(); // the first chunk, already in hand
  assert.equal(r.state.pulls, 1);
  await reader.read();
  assert.equal(r.state.pulls, 2);
  await reader.read();
  assert.equal(r.state.pulls, 3);
  await reader.cancel();
  await r.cancelled;
});

Deno.test("SseRelay: a break after a partial event sends a blank line, then an SSE error event", async () => {
  const boom = new Error("connection reset by peer");
  const r = await relay(['data: {"a":1}\n\n', 'data: {"par'], boom);
  const text = await readAll(r.out);
  const head = 'data: {"a":1}\n\ndata: {"par';
  assert.ok(text.startsWith(head), text);
  const tail = text.slice(head.length);
  assert.ok(tail.startsWith("\n\nevent: error\ndata: "), JSON.stringify(tail));
  assert.ok(tail.endsWith("\n\n"));
  const data = JSON.parse(tail.slice("\n\nevent: error\ndata: ".length));
  assert.deepEqual(data, {
    error: {
      message: "worker http://w1:8000 stream broke: connection reset by peer",
      type: "Bad Gateway",
      code: "upstream_stream_error",
      param: null,
    },
  });
  assert.deepEqual(sseEvents(text).map((e) => e.event), ["message", "message", "error"]);
  assert.deepEqual(r.ends, [["error", boom]]);
});

Deno.test("SseRelay: a break right after a complete event sends no extra blank line", async () => {
  const r = await relay(["data: a\n\n", "data: b\n\n"], new Error("gone"));
  const text = await readAll(r.out);
  assert.ok(text.startsWith("data: a\n\ndata: b\n\nevent: error\ndata: {"), JSON.stringify(text));
  assert.ok(text.endsWith("}\n\n"));
  assert.deepEqual(sseEvents(text).map((e) => e.event), ["message", "message", "error"]);
  assert.equal(r.ends.length, 1);
  assert.equal(r.ends[0][0], "error");
});

Deno.test("SseRelay: a break after the first chunk only still ends with an error event", async () => {
  const r = await relay(["data: a\r\n\r\n"], new Error("gone"));
  const text = await readAll(r.out);
  assert.ok(text.startsWith("data: a\r\n\r\nevent: error\n"), JSON.stringify(text));
  assert.deepEqual(r.ends.map(([how]) => how), ["error"]);
});

Deno.test({
  name:
    "SseRelay: a break after a CRLF-terminated line (not a blank line) still separates the error event",
  fn: async () => {
    const r = await relay(["data: a\n\n", "data: x\r\n"], new Error("gone"));
    const events = sseEvents(await readAll(r.out));
    assert.deepEqual(events.map((e) => e.event), ["message", "message", "error"]);
    assert.equal(events[1].data, "x");
  },
});

Deno.test("SseRelay: the client leaving cancels the worker's body, and onEnd(cancelled) runs once", async () => {
  const r = await relay(["data: a\n\n", "data: b\n\n", "data: c\n\n"]);
  const reader = r.out.getReader();
  await reader.read();
  await reader.read();
  await reader.cancel("client went away");
  assert.equal(await r.cancelled, "relay cancelled", "the worker's body saw the cancel");
  assert.deepEqual(r.ends, [["cancelled", undefined]]);
});

Deno.test("SseRelay: cancelling before the first chunk is taken also cancels the worker", async () => {
  const r = await relay(["data: a\n\n", "data: b\n\n"]);
  await r.out.cancel();
  await r.cancelled;
  assert.equal(r.state.cancelled, true);
  assert.deepEqual(r.ends.map(([how]) => how), ["cancelled"]);
});

Deno.test("SseRelay: cancelling after the end does not report a second end", async () => {
  const r = await relay(["data: a\n\n", "data: [DONE]\n\n"]);
  await readAll(r.out);
  await r.out.cancel().catch(() => {});
  assert.deepEqual(r.ends.map(([how]) => how), ["done"]);
});

Deno.test("sseErrorEvent: the exact frame, with and without a leading boundary", () => {
  const body = JSON.stringify({
    error: { message: "it broke", type: "Bad Gateway", code: "some_code", param: null },
  });
  assert.equal(
    dec.decode(sseErrorEvent("it broke", "some_code", false)),
    `event: error\ndata: ${body}\n\n`,
  );
  assert.equal(
    dec.decode(sseErrorEvent("it broke", "some_code", true)),
    `\n\nevent: error\ndata: ${body}\n\n`,
  );
  const tricky = dec.decode(sseErrorEvent('line1\nline2 "q"', "c", false));
  assert.equal(tricky.split("\n").length, 4, "a newline in the message stays inside the JSON");
  assert.equal(JSON.parse(tricky.split("\n")[1].slice(6)).error.message, 'line1\nline2 "q"');
});
