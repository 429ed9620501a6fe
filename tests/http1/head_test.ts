/**
 * The head parsing shared by the worker client and the front: where a head ends, Latin-1 text,
 * the header block (framing, `connection`, strictness for requests) and keep-alive.
 */

import assert from "node:assert/strict";
import { headEnd, keepsAlive, latin1, parseFields } from "../../lib/http1/head.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const fail = (msg: string) => new Error(msg);

Deno.test("headEnd: just past the blank line (CRLF or bare LF), -1 until it has arrived", () => {
  const h = bytes("GET / HTTP/1.1\r\nhost: a\r\n\r\nbody");
  assert.equal(headEnd(h, 0, h.length), h.length - 4);
  assert.equal(headEnd(h, 0, h.length - 6), -1, "the blank line is cut off");
  const lf = bytes("HTTP/1.1 200 OK\nx: 1\n\n");
  assert.equal(headEnd(lf, 0, lf.length), lf.length);
});

Deno.test("latin1: one character per byte, whatever the bytes", () => {
  assert.equal(latin1(bytes("plain")), "plain");
  assert.equal(latin1(new Uint8Array([0x63, 0xc3, 0xa9])), "c\u00c3\u00a9");
});

Deno.test("parseFields: headers in order, framing and connection", () => {
  const f = parseFields("Content-Length: 5\r\nX-A:  1 \r\nConnection: close\r\n\r\n", 0, fail);
  assert.deepEqual(f.headers, [["content-length", "5"], ["x-a", "1"], ["connection", "close"]]);
  assert.equal(f.length, 5);
  assert.equal(f.chunked, false);
  assert.equal(f.connection, "close");
  const c = parseFields("transfer-encoding: gzip, chunked\r\ncontent-length: 3\r\n\r\n", 0, fail);
  assert.deepEqual([c.chunked, c.length, c.ambiguous], [true, -1, true], "chunked wins");
});

Deno.test("parseFields: refuses what could smuggle; requests (strict) refuse folding too", () => {
  for (
    const [block, why] of [
      ["content-length: 5\r\ncontent-length: 6\r\n\r\n", 'bad content-length "6"'],
      ["content-length: five\r\n\r\n", 'bad content-length "five"'],
      ["transfer-encoding: gzip\r\n\r\n", 'unsupported transfer-encoding "gzip"'],
      ["no colon\r\n\r\n", "a header line without a colon"],
    ]
  ) {
    assert.throws(() => parseFields(block, 0, fail), new Error(why));
  }
  const folded = "x-a: 1\r\n  more\r\n\r\n";
  assert.deepEqual(parseFields(folded, 0, fail).headers, [["x-a", "1 more"]]);
  assert.throws(() => parseFields(folded, 0, fail, true), new Error("obsolete line folding"));
  assert.throws(
    () => parseFields("x-a: a\u0001b\r\n\r\n", 0, fail, true),
    /bad value of header x-a/,
  );
});

Deno.test("keepsAlive: HTTP/1.1 unless close, HTTP/1.0 only with keep-alive, never when ambiguous", () => {
  const f = (block: string) => parseFields(block, 0, fail);
  assert.equal(keepsAlive(f("\r\n"), false), true);
  assert.equal(keepsAlive(f("connection: Close\r\n\r\n"), false), false);
  assert.equal(keepsAlive(f("\r\n"), true), false);
  assert.equal(keepsAlive(f("connection: keep-alive\r\n\r\n"), true), true);
  assert.equal(
    keepsAlive(f("content-length: 1\r\ntransfer-encoding: chunked\r\n\r\n"), false),
    false,
  );
});
