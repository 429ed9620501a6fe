/**
 * The chunked-body decoder shared by the worker client and the front: payload ranges found in
 * whatever piece of the body is in the buffer, lines cut by the buffer's end left for the next
 * call, and malformed framing raised through the caller's own error.
 */

import assert from "node:assert/strict";
import { ChunkedDecoder } from "../../lib/http1/chunked.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const fail = (msg: string) => new Error(`bad body: ${msg}`);

/** Feeds `body` to a decoder in pieces of `step` bytes, as reads would bring it. */
function decodeInPieces(body: string, step: number): { payload: string; done: boolean } {
  const all = bytes(body);
  const dec = new ChunkedDecoder(fail);
  let payload = "";
  let start = 0;
  for (let end = Math.min(step, all.length);; end = Math.min(end + step, all.length)) {
    const out: number[] = [];
    start = dec.decode(all, start, end, out);
    for (let i = 0; i < out.length; i += 2) payload += text(all.subarray(out[i], out[i + 1]));
    if (dec.done || end === all.length) break;
  }
  return { payload, done: dec.done };
}

Deno.test("chunked: the payload comes out whole however the body is cut into reads", () => {
  const body = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\ntrailer: x\r\n\r\n";
  for (const step of [1, 2, 3, 7, body.length]) {
    assert.deepEqual(
      decodeInPieces(body, step),
      { payload: "hello, world", done: true },
      `${step}`,
    );
  }
});

Deno.test("chunked: bare LF line ends are accepted", () => {
  assert.deepEqual(decodeInPieces("3\nabc\n0\n\n", 4), { payload: "abc", done: true });
});

Deno.test("chunked: malformed framing throws the caller's error", () => {
  for (
    const [body, why] of [
      ["zz\r\nabc\r\n", "bad chunk size"],
      ["3\r\nabcd\r\n", "chunk data longer than its size"],
      ["3\r\nabc\rX", "chunk data not followed by CRLF"],
      [`${"0".repeat(5000)}`, "a chunk-size or trailer line is too long"],
    ]
  ) {
    assert.throws(() => decodeInPieces(body, body.length), new Error(`bad body: ${why}`));
  }
});
