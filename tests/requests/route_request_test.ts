import assert from "node:assert/strict";
import { GatewayError } from "../../lib/core/errors.ts";
import type { Endpoint } from "../../lib/core/types.ts";
import {
  extractRouteRequest,
  parseRoutingTokens,
  routingKeyFrom,
} from "../../lib/requests/route_request.ts";

const OPTS = { routingKeyHeaders: ["x-smg-routing-key"] };

function extract(endpoint: Endpoint, body: unknown, headers: HeadersInit = {}) {
  return extractRouteRequest(endpoint, body, new Headers(headers), OPTS);
}

/** Asserts a 400 invalid_request naming `param`. */
function rejects(endpoint: Endpoint, body: unknown, param: string | null, name: string) {
  assert.throws(() => extract(endpoint, body), (e) => {
    assert.ok(e instanceof GatewayError, `${name}: not a GatewayError: ${e}`);
    assert.equal(e.status, 400, name);
    assert.equal(e.code, "invalid_request", name);
    assert.equal(e.param, param, `${name}: ${e.message}`);
    return true;
  }, name);
}

const M = "m";
const msgs = [{ role: "user", content: "hi" }];

Deno.test("extractRouteRequest: routing text per endpoint", () => {
  const table: { name: string; endpoint: Endpoint; body: unknown; text: string }[] = [
    {
      name: "chat joins every message's text in order",
      endpoint: "chat",
      body: {
        model: M,
        messages: [
          { role: "system", content: "be brief" },
          {
            role: "user",
            content: [
              { type: "text", text: "look at" },
              { type: "image_url", image_url: { url: "http://x/y.png" } },
              { type: "text", text: "this" },
            ],
          },
          { role: "assistant", content: null, reasoning_content: "thinking" },
          { role: "assistant", content: "ok", tool_calls: [] },
        ],
      },
      text: "be brief look at this thinking ok",
    },
    {
      name: "chat skips empty contents",
      endpoint: "chat",
      body: { model: M, messages: [{ role: "user", content: "" }, { role: "user", content: "x" }] },
      text: "x",
    },
    {
      name: "completions prompt string",
      endpoint: "completions",
      body: { model: M, prompt: "once upon" },
      text: "once upon",
    },
    {
      name: "completions prompt array of strings",
      endpoint: "completions",
      body: { model: M, prompt: ["a", "b c"] },
      text: "a b c",
    },
    {
      name: "completions prompt token ids",
      endpoint: "completions",
      body: { model: M, prompt: [1, 2, 3] },
      text: "1 2 3",
    },
    {
      name: "completions prompt batch of token ids uses the first",
      endpoint: "completions",
      body: { model: M, prompt: [[4, 5], [6]] },
      text: "4 5",
    },
    { name: "generate text", endpoint: "generate", body: { text: "hello" }, text: "hello" },
    {
      name: "generate batch text uses the first",
      endpoint: "generate",
      body: { text: ["first", "second"] },
      text: "first",
    },
    {
      name: "generate input_ids only",
      endpoint: "generate",
      body: { input_ids: [7, 8, 9] },
      text: "7 8 9",
    },
    {
      name: "embeddings string",
      endpoint: "embeddings",
      body: { model: M, input: "e" },
      text: "e",
    },
    {
      name: "embeddings array",
      endpoint: "embeddings",
      body: { model: M, input: ["e", "f"] },
      text: "e f",
    },
    {
      name: "embeddings token ids route without text",
      endpoint: "embeddings",
      body: { model: M, input: [1, 2] },
      text: "",
    },
    {
      name: "rerank query",
      endpoint: "rerank",
      body: { query: "q?", documents: ["a", "b"] },
      text: "q?",
    },
  ];
  for (const c of table) {
    const r = extract(c.endpoint, c.body);
    assert.equal(r.text, c.text, c.name);
    assert.equal(r.endpoint, c.endpoint, c.name);
  }
});

Deno.test("extractRouteRequest: model, stream, rid and headers come through", () => {
  const headers = new Headers({ "x-smg-routing-key": "session-1" });
  const r = extractRouteRequest(
    "chat",
    { model: "llama", messages: msgs, stream: true, rid: "r-1" },
    headers,
    OPTS,
  );
  assert.equal(r.model, "llama");
  assert.equal(r.stream, true);
  assert.equal(r.rid, "r-1");
  assert.equal(r.routingKey, "session-1");
  assert.equal(r.headers, headers);
  assert.equal(r.tokens, null);

  const g = extract("generate", { text: "x", rid: 5 });
  assert.equal(g.model, null);
  assert.equal(g.stream, false);
  assert.equal(g.rid, null);
  assert.equal(g.routingKey, null);
});

Deno.test("extractRouteRequest: token ids from input_ids, the first sequence of a batch", () => {
  assert.deepEqual(extract("generate", { input_ids: [1, 2, 3] }).tokens, [1, 2, 3]);
  assert.deepEqual(extract("generate", { input_ids: [[4, 5], [6, 7]] }).tokens, [4, 5]);
  assert.equal(extract("generate", { text: "t", input_ids: [] }).tokens, null);
  const both = extract("generate", { text: "words", input_ids: [1] });
  assert.equal(both.text, "words");
  assert.deepEqual(both.tokens, [1]);
});

Deno.test("extractRouteRequest: a valid x-smg-routing-tokens header wins over input_ids", () => {
  const r = extract("generate", { input_ids: [1, 2] }, { "x-smg-routing-tokens": "9,8,7" });
  assert.deepEqual(r.tokens, [9, 8, 7]);
  const chat = extract("chat", { model: M, messages: msgs }, { "x-smg-routing-tokens": "5" });
  assert.deepEqual(chat.tokens, [5]);
  const bad = extract("generate", { input_ids: [1, 2] }, { "x-smg-routing-tokens": "9,x" });
  assert.deepEqual(bad.tokens, [1, 2]);
});

Deno.test("extractRouteRequest: validation errors name the field", () => {
  const table: { name: string; endpoint: Endpoint; body: unknown; param: string | null }[] = [
    { name: "array body", endpoint: "chat", body: [], param: null },
    { name: "null body", endpoint: "chat", body: null, param: null },
    { name: "string body", endpoint: "generate", body: "text", param: null },
    { name: "model number", endpoint: "chat", body: { model: 1, messages: msgs }, param: "model" },
    { name: "model object", endpoint: "generate", body: { model: {}, text: "x" }, param: "model" },
    { name: "chat without model", endpoint: "chat", body: { messages: msgs }, param: "model" },
    {
      name: "chat with empty model",
      endpoint: "chat",
      body: { model: "", messages: msgs },
      param: "model",
    },
    {
      name: "completions without model",
      endpoint: "completions",
      body: { prompt: "x" },
      param: "model",
    },
    {
      name: "embeddings without model",
      endpoint: "embeddings",
      body: { input: "x" },
      param: "model",
    },
    { name: "messages missing", endpoint: "chat", body: { model: M }, param: "messages" },
    {
      name: "messages not array",
      endpoint: "chat",
      body: { model: M, messages: "hi" },
      param: "messages",
    },
    {
      name: "messages empty",
      endpoint: "chat",
      body: { model: M, messages: [] },
      param: "messages",
    },
    {
      name: "message not object",
      endpoint: "chat",
      body: { model: M, messages: [{ role: "user", content: "a" }, "b"] },
      param: "messages[1]",
    },
    {
      name: "message without role",
      endpoint: "chat",
      body: { model: M, messages: [{ content: "a" }] },
      param: "messages[0].role",
    },
    {
      name: "message with empty role",
      endpoint: "chat",
      body: { model: M, messages: [{ role: "", content: "a" }] },
      param: "messages[0].role",
    },
    {
      name: "content number",
      endpoint: "chat",
      body: { model: M, messages: [{ role: "user", content: 5 }] },
      param: "messages[0].content",
    },
    {
      name: "content part not object",
      endpoint: "chat",
      body: { model: M, messages: [{ role: "user", content: ["x"] }] },
      param: "messages[0].content",
    },
    {
      name: "stream string",
      endpoint: "chat",
      body: { model: M, messages: msgs, stream: "true" },
      param: "stream",
    },
    {
      name: "stream_options not object",
      endpoint: "chat",
      body: { model: M, messages: msgs, stream: true, stream_options: true },
      param: "stream_options",
    },
    {
      name: "max_tokens negative",
      endpoint: "chat",
      body: { model: M, messages: msgs, max_tokens: -1 },
      param: "max_tokens",
    },
    {
      name: "max_tokens fractional",
      endpoint: "completions",
      body: { model: M, prompt: "x", max_tokens: 1.5 },
      param: "max_tokens",
    },
    {
      name: "max_tokens string",
      endpoint: "completions",
      body: { model: M, prompt: "x", max_tokens: "10" },
      param: "max_tokens",
    },
    {
      name: "max_completion_tokens negative",
      endpoint: "chat",
      body: { model: M, messages: msgs, max_completion_tokens: -5 },
      param: "max_completion_tokens",
    },
    {
      name: "n zero",
      endpoint: "chat",
      body: { model: M, messages: msgs, n: 0 },
      param: "n",
    },
    { name: "prompt missing", endpoint: "completions", body: { model: M }, param: "prompt" },
    {
      name: "prompt number",
      endpoint: "completions",
      body: { model: M, prompt: 42 },
      param: "prompt",
    },
    {
      name: "prompt mixed array",
      endpoint: "completions",
      body: { model: M, prompt: ["a", 1] },
      param: "prompt",
    },
    {
      name: "generate with neither text nor input_ids",
      endpoint: "generate",
      body: { sampling_params: {} },
      param: "text",
    },
    { name: "generate text number", endpoint: "generate", body: { text: 3 }, param: "text" },
    {
      name: "input_ids of strings",
      endpoint: "generate",
      body: { input_ids: ["1", "2"] },
      param: "input_ids",
    },
    {
      name: "input_ids negative",
      endpoint: "generate",
      body: { input_ids: [1, -2] },
      param: "input_ids",
    },
    {
      name: "input_ids fractional",
      endpoint: "generate",
      body: { input_ids: [1.5] },
      param: "input_ids",
    },
    {
      name: "input_ids a number",
      endpoint: "generate",
      body: { input_ids: 5 },
      param: "input_ids",
    },
    {
      name: "embeddings input missing",
      endpoint: "embeddings",
      body: { model: M },
      param: "input",
    },
    {
      name: "embeddings input object",
      endpoint: "embeddings",
      body: { model: M, input: { a: 1 } },
      param: "input",
    },
    { name: "rerank query missing", endpoint: "rerank", body: { documents: [] }, param: "query" },
    {
      name: "rerank documents missing",
      endpoint: "rerank",
      body: { query: "q" },
      param: "documents",
    },
  ];
  for (const c of table) rejects(c.endpoint, c.body, c.param, c.name);
});

Deno.test("extractRouteRequest: the error message quotes what was wrong", () => {
  assert.throws(
    () => extract("chat", { model: M, messages: msgs, max_tokens: -3 }),
    /'max_tokens' must be an integer >= 0, got -3/,
  );
  assert.throws(
    () => extract("chat", { model: 7, messages: msgs }),
    /'model' must be a string, got number/,
  );
});

Deno.test("extractRouteRequest: null optional fields and boundary values are accepted", () => {
  const r = extract("chat", {
    model: M,
    messages: msgs,
    stream: null,
    max_tokens: 0,
    n: 1,
    stream_options: null,
    unknown_field: { kept: true },
  });
  assert.equal(r.stream, false);
  // generate may name no model, and input_embeds alone is enough.
  assert.equal(extract("generate", { input_embeds: [[0.1]] }).text, "");
});

Deno.test("parseRoutingTokens: comma-separated u32 ids, else null", () => {
  const ids512 = Array.from({ length: 512 }, (_, i) => String(i)).join(",");
  const ids513 = ids512 + ",1";
  const table: [string | null, number[] | null][] = [
    ["1,2,3", [1, 2, 3]],
    ["0", [0]],
    ["4294967295", [4294967295]],
    ["4294967296", null],
    ["99999999999", null],
    [ids513, null],
    [Array(400).fill("4000000000").join(","), null], // 400 ids but over 4096 bytes
    ["1,a", null],
    ["-1", null],
    ["1.5", null],
    ["1, 2", null],
    [" 1", null],
    ["1,,2", null],
    ["1,", null],
    [",1", null],
    ["", null],
    [null, null],
  ];
  for (const [value, want] of table) {
    assert.deepEqual(parseRoutingTokens(value), want, String(value).slice(0, 40));
  }
  assert.equal(parseRoutingTokens(ids512)?.length, 512);
});

Deno.test("routingKeyFrom: the first configured header with a valid value wins", () => {
  const names = ["x-a", "x-b", "x-c"];
  const table: [Record<string, string>, string | null][] = [
    [{ "x-a": "one", "x-b": "two" }, "one"],
    [{ "x-b": "two", "x-c": "three" }, "two"],
    [{ "x-a": "k".repeat(129), "x-b": "two" }, "two"],
    [{ "x-a": "k".repeat(128) }, "k".repeat(128)],
    [{ "x-a": "k".repeat(129) }, null],
    [{ "x-other": "z" }, null],
    [{}, null],
  ];
  for (const [h, want] of table) {
    assert.equal(routingKeyFrom(new Headers(h), names), want, JSON.stringify(h).slice(0, 60));
  }
  assert.equal(routingKeyFrom(new Headers({ "x-a": "v" }), []), null);
});

/** A header value as Deno.serve hands it over: one character per byte received. */
function asReceived(utf8: string): string {
  return String.fromCharCode(...new TextEncoder().encode(utf8));
}

Deno.test("routingKeyFrom: a key of more than 128 UTF-8 bytes is ignored", () => {
  // 65 two-byte characters: 130 bytes on the wire.
  const v = asReceived("é".repeat(65));
  assert.equal(routingKeyFrom(new Headers({ "x-k": v }), ["x-k"]), null);
});

Deno.test({
  name: "routingKeyFrom: a non-ASCII key of exactly 128 UTF-8 bytes is kept",
  fn: () => {
    const v = asReceived("é".repeat(64)); // 128 bytes on the wire
    assert.equal(routingKeyFrom(new Headers({ "x-k": v }), ["x-k"]), v);
  },
});
