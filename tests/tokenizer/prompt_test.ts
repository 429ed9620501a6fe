/**
 * A request's prompt as token ids, read the one way the gateway routes on it and a simulated
 * worker with the same tokenizer reads it: chat through Qwen3's template without special tokens,
 * completion and `/generate` text with them, token ids as given, and 400s naming the field.
 */

import assert from "node:assert/strict";
import { GatewayError } from "../../lib/core/errors.ts";
import { promptOf } from "../../lib/tokenizer/prompt.ts";
import { qwen3 } from "../../support/qwen3.ts";

const tok = qwen3();

Deno.test("prompt: chat messages through the template, text parts joined, no special tokens added", () => {
  const messages = [
    { role: "system", content: "be brief" },
    { role: "user", content: [{ type: "text", text: "hello " }, { type: "text", text: "there" }] },
  ];
  const text = tok.applyChatTemplate([
    { role: "system", content: "be brief" },
    { role: "user", content: "hello there" },
  ]);
  assert.deepEqual(promptOf("chat", { messages }, tok), { ids: tok.encode(text, false), text });
});

Deno.test("prompt: completion and /generate text with special tokens; token ids as given", () => {
  assert.deepEqual(promptOf("completions", { prompt: "once upon" }, tok).ids, [
    ...tok.encode("once upon", true),
  ]);
  assert.deepEqual(promptOf("completions", { prompt: [5, 6, 7] }, tok), {
    ids: [5, 6, 7],
    text: "",
  });
  assert.deepEqual(promptOf("generate", { text: "a time" }, tok).ids, tok.encode("a time", true));
  assert.deepEqual(promptOf("generate", { input_ids: [9, 8], text: "ignored" }, tok).ids, [9, 8]);
});

Deno.test("prompt: what cannot be read is a 400 naming the field", () => {
  const refused = (f: () => unknown, param: string) =>
    assert.throws(f, (e) => e instanceof GatewayError && e.status === 400 && e.param === param);
  refused(() => promptOf("completions", { prompt: { x: 1 } }, tok), "prompt");
  refused(() => promptOf("completions", { prompt: "" }, tok), "prompt");
  refused(() => promptOf("generate", {}, tok), "text");
  refused(() => promptOf("generate", { input_ids: [-1] }, tok), "input_ids");
  assert.throws(() => promptOf("embeddings", { input: "x" }, tok), /not served/);
});
