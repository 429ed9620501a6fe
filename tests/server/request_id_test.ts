import assert from "node:assert/strict";
import { newRequestId, requestIdFor } from "../../lib/server/request_id.ts";

const NAMES = ["x-request-id", "x-correlation-id", "x-trace-id", "request-id"];

Deno.test("newRequestId: SMG's per-endpoint prefix and 24 alphanumerics", () => {
  const table: [string, string][] = [
    ["/v1/chat/completions", "chatcmpl-"],
    ["/v1/completions", "cmpl-"],
    ["/generate", "gnt-"],
    ["/v1/embeddings", "req-"],
    ["/v1/rerank", "req-"],
    ["/anything", "req-"],
  ];
  for (const [path, prefix] of table) {
    const id = newRequestId(path);
    assert.ok(id.startsWith(prefix), `${path}: ${id}`);
    assert.match(id.slice(prefix.length), /^[A-Za-z0-9]{24}$/, `${path}: ${id}`);
  }
});

Deno.test("newRequestId: ids do not repeat", () => {
  const ids = new Set(Array.from({ length: 1000 }, () => newRequestId("/generate")));
  assert.equal(ids.size, 1000);
});

Deno.test("requestIdFor: the first configured header present wins", () => {
  const table: [Record<string, string>, string][] = [
    [{ "x-request-id": "a", "x-trace-id": "c" }, "a"],
    [{ "x-trace-id": "c", "x-correlation-id": "b" }, "b"],
    [{ "request-id": "d" }, "d"],
    [{ "X-Request-Id": "mixed-case" }, "mixed-case"],
  ];
  for (const [h, want] of table) {
    assert.equal(requestIdFor(new Headers(h), NAMES, "/generate"), want, JSON.stringify(h));
  }
});

Deno.test("requestIdFor: without a client id, a fresh one for the path", () => {
  const id = requestIdFor(new Headers({ "x-other": "z" }), NAMES, "/v1/chat/completions");
  assert.match(id, /^chatcmpl-[A-Za-z0-9]{24}$/);
  // A header not in the configured list is not read.
  const custom = requestIdFor(new Headers({ "x-request-id": "a" }), ["x-my-id"], "/generate");
  assert.match(custom, /^gnt-/);
});

Deno.test("requestIdFor: over-long or empty client ids are ignored", () => {
  const long = "x".repeat(257);
  assert.match(
    requestIdFor(new Headers({ "x-request-id": long }), NAMES, "/v1/completions"),
    /^cmpl-[A-Za-z0-9]{24}$/,
  );
  const next = requestIdFor(
    new Headers({ "x-request-id": long, "x-correlation-id": "ok" }),
    NAMES,
    "/v1/completions",
  );
  assert.equal(next, "ok");
  const max = "y".repeat(256);
  assert.equal(requestIdFor(new Headers({ "x-request-id": max }), NAMES, "/generate"), max);
  assert.match(
    requestIdFor(new Headers({ "x-request-id": "" }), NAMES, "/generate"),
    /^gnt-[A-Za-z0-9]{24}$/,
  );
});
