/**
 * Reading a request body under `--max-payload-size`: a declared length over the cap is refused
 * without reading, a chunked body is cut off once it passes the cap, a body within the cap comes
 * back byte for byte, and JSON parsing answers 400 `json_parse_error`.
 */

import assert from "node:assert/strict";
import { GatewayError } from "../../lib/core/errors.ts";
import { parseJson, readBody } from "../../lib/proxy/body.ts";

const enc = new TextEncoder();

/** A chunked (no content-length) POST whose body yields `chunks`, counting the chunks pulled. */
function chunked(chunks: Uint8Array[]) {
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks[pulled++];
      if (next) c.enqueue(next);
      else c.close();
    },
  }, { highWaterMark: 0 });
  const req = new Request("http://gw/v1/chat/completions", {
    method: "POST",
    body: stream,
    duplex: "half",
  } as RequestInit);
  return { req, pulled: () => pulled };
}

/** Asserts `p` rejects with a GatewayError of `status` and `code`. */
async function rejectsWith(p: Promise<unknown>, status: number, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof GatewayError, `not a GatewayError: ${e}`);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    return true;
  });
}

Deno.test("readBody: a declared Content-Length over the cap is a 413 before any byte is read", async () => {
  const { req, pulled } = chunked([new Uint8Array(10)]);
  const declared = new Request(req, { headers: { "content-length": "1001" } });
  await assert.rejects(readBody(declared, 1000), (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.status, 413);
    assert.equal(e.code, "payload_too_large");
    assert.match(e.message, /1000-byte limit/);
    return true;
  });
  assert.equal(declared.bodyUsed, false, "the body was not consumed");
  assert.equal(pulled(), 0, "no chunk was pulled");
  await declared.body?.cancel();
});

Deno.test("readBody: a declared Content-Length equal to the cap is read", async () => {
  const body = "x".repeat(100);
  const req = new Request("http://gw/", {
    method: "POST",
    body,
    headers: { "content-length": "100" },
  });
  assert.equal(new TextDecoder().decode(await readBody(req, 100)), body);
});

Deno.test("readBody: a chunked body passing the cap is a 413 and is not read to the end", async () => {
  const chunks = Array.from({ length: 10 }, () => new Uint8Array(400));
  const { req, pulled } = chunked(chunks);
  assert.equal(req.headers.get("content-length"), null, "no declared length");
  await rejectsWith(readBody(req, 1000), 413, "payload_too_large");
  assert.equal(pulled(), 3, "reading stopped at the chunk that passed 1000 bytes");
});

Deno.test("readBody: a chunked body within the cap comes back exactly, in order", async () => {
  const parts = ['{"model":', '"m",', '"x":"é"}'].map((s) => enc.encode(s));
  const { req } = chunked(parts);
  const bytes = await readBody(req, 1000);
  assert.equal(new TextDecoder().decode(bytes), '{"model":"m","x":"é"}');
  const total = parts.reduce((n, p) => n + p.byteLength, 0);
  assert.equal(bytes.byteLength, total);
});

Deno.test("readBody: a chunked body of exactly the cap is accepted", async () => {
  const { req } = chunked([new Uint8Array(600).fill(1), new Uint8Array(400).fill(2)]);
  const bytes = await readBody(req, 1000);
  assert.equal(bytes.byteLength, 1000);
  assert.equal(bytes[599], 1);
  assert.equal(bytes[600], 2);
});

Deno.test("readBody: a request without a body gives zero bytes", async () => {
  const bytes = await readBody(new Request("http://gw/", { method: "POST" }), 10);
  assert.equal(bytes.byteLength, 0);
});

Deno.test("readBody: a body that breaks off mid-way is a 400 invalid_request", async () => {
  let n = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (n++ === 0) c.enqueue(enc.encode('{"a":'));
      else c.error(new Error("connection reset"));
    },
  }, { highWaterMark: 0 });
  const req = new Request(
    "http://gw/",
    { method: "POST", body: stream, duplex: "half" } as RequestInit,
  );
  await assert.rejects(readBody(req, 1000), (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.status, 400);
    assert.equal(e.code, "invalid_request");
    assert.match(e.message, /connection reset/);
    return true;
  });
});

Deno.test("parseJson: bad JSON is a 400 json_parse_error of type invalid_request_error", () => {
  for (const text of ["{", "not json", "", '{"a":1,}']) {
    assert.throws(() => parseJson(enc.encode(text)), (e: unknown) => {
      assert.ok(e instanceof GatewayError, text);
      assert.equal(e.status, 400);
      assert.equal(e.code, "json_parse_error");
      assert.equal(e.type, "invalid_request_error");
      assert.match(e.message, /not valid JSON/);
      return true;
    }, JSON.stringify(text));
  }
});

Deno.test("parseJson: good JSON is parsed, UTF-8 included", () => {
  assert.deepEqual(parseJson(enc.encode('{"model":"m","messages":[{"content":"héllo ✓"}]}')), {
    model: "m",
    messages: [{ content: "héllo ✓" }],
  });
  assert.equal(parseJson(enc.encode("42")), 42);
  assert.equal(parseJson(enc.encode("null")), null);
});
