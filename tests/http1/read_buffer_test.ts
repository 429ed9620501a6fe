/**
 * The read buffer shared by the client and the front: where the next read goes, room made by
 * moving or growing, a sized body's length fitted at once, and a large empty buffer given back.
 */

import assert from "node:assert/strict";
import { READ_BUFFER, type ReadBuffer, readSpace } from "../../lib/http1/read_buffer.ts";

const buffer = (size: number, start: number, end: number): ReadBuffer => {
  const buf = new Uint8Array(size);
  for (let i = start; i < end; i++) buf[i] = i & 0xff;
  return { buf, start, end };
};

Deno.test("readSpace: an empty buffer rewinds; a large empty one is replaced by a small one", () => {
  const b = buffer(READ_BUFFER, 100, 100);
  assert.equal(readSpace(b).length, READ_BUFFER);
  assert.equal(b.start, 0);
  const big = buffer(8 * READ_BUFFER, 5000, 5000);
  assert.equal(readSpace(big).length, READ_BUFFER);
  assert.equal(big.buf.length, READ_BUFFER, "the large buffer is let go");
});

Deno.test("readSpace: a full buffer moves its bytes to the front, or grows keeping them", () => {
  const moved = buffer(1000, 900, 1000);
  assert.equal(readSpace(moved).length, 900);
  assert.deepEqual([moved.start, moved.end, moved.buf[0]], [0, 100, 900 & 0xff]);
  const grown = buffer(1000, 100, 1000);
  assert.equal(readSpace(grown).length, 1100);
  assert.deepEqual([grown.start, grown.end, grown.buf.length, grown.buf[0]], [0, 900, 2000, 100]);
});

Deno.test("readSpace: a wanted length is fitted at once instead of doubling", () => {
  const b: ReadBuffer = { ...buffer(1000, 0, 1000), want: 100_000 };
  readSpace(b);
  assert.equal(b.buf.length, 100_000);
  assert.equal(b.end, 1000);
});
