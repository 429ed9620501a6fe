/**
 * Continuing a broken stream as values: which requests may be (`blockedBy`), the text so far read
 * back from the events sent (`Transcript`), the request for the rest (`continuationBody`), the
 * continuing worker's events rewritten into the client's stream (`Rewriter`), and the relay
 * sending whole events only while a continuer may cut there.
 */

import assert from "node:assert/strict";
import {
  blockedBy,
  continuationBody,
  Rewriter,
  Transcript,
} from "../../../lib/proxy/http/continuation.ts";
import { type Continuer, SseRelay } from "../../../lib/proxy/http/relay.ts";
import type { ChunkSource } from "../../../lib/core/http.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const chat = { model: "m", messages: [{ role: "user", content: "hi" }], stream: true };
const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const piece = (content: string, role = false) =>
  chunk({
    id: "c1",
    created: 7,
    model: "m",
    choices: [{ index: 0, delta: role ? { role: "assistant", content } : { content } }],
  });

Deno.test("continuation: which requests may be continued, and why not", () => {
  assert.equal(blockedBy("chat", chat), null);
  assert.equal(blockedBy("completions", { prompt: "p", stream: true }), null);
  assert.equal(blockedBy("chat", { ...chat, n: 2 }), "n > 1");
  assert.equal(blockedBy("chat", { ...chat, logprobs: true }), "logprobs");
  assert.equal(blockedBy("chat", { ...chat, tools: [{}] }), "tools");
  assert.equal(blockedBy("chat", { ...chat, stop: ["\n"] }), "stop strings");
  assert.equal(blockedBy("chat", { ...chat, stop: [] }), null);
  assert.equal(
    blockedBy("chat", { ...chat, response_format: { type: "json_object" } }),
    "constrained output",
  );
  assert.equal(
    blockedBy("chat", { ...chat, continue_final_message: true }),
    "a request that continues a message itself",
  );
  assert.equal(
    blockedBy("completions", { prompt: [1, 2], stream: true }),
    "a prompt that is not one string",
  );
  assert.equal(
    blockedBy("completions", { prompt: "p", stream: true, echo: true }),
    "echo or suffix",
  );
  assert.equal(blockedBy("generate", { text: "p", stream: true }), null);
  assert.equal(
    blockedBy("generate", { input_ids: [1], stream: true }),
    "a prompt that is not one text (input_ids, a batch)",
  );
  assert.equal(
    blockedBy("generate", { text: "p", stream: true, sampling_params: { stop: ["x"] } }),
    "stop strings",
  );
  assert.equal(blockedBy("embeddings", { input: "p", stream: true }), "the embeddings endpoint");
  assert.equal(blockedBy("chat", { ...chat, stream: false }), "a whole answer");
});

Deno.test("continuation: the transcript reads back the text, pieces, id and whether it finished", () => {
  const t = new Transcript("chat");
  t.add(enc.encode(piece("Hel", true) + piece("lo")));
  t.add(enc.encode(piece(" wor") + ": keep-alive comment\n\n"));
  const s = t.read();
  assert.deepEqual(
    { id: s.id, created: s.created, model: s.model, text: s.text, pieces: s.pieces },
    { id: "c1", created: 7, model: "m", text: "Hello wor", pieces: 3 },
  );
  assert.equal(s.finished, false);
  assert.equal(s.blocked, null);
  t.add(enc.encode(chunk({ id: "c1", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })));
  assert.equal(t.read().finished, true);
  const tools = new Transcript("chat");
  tools.add(enc.encode(chunk({ id: "c", choices: [{ index: 0, delta: { tool_calls: [{}] } }] })));
  assert.equal(tools.read().blocked, "tool calls");
  const two = new Transcript("completions");
  two.add(enc.encode(chunk({ id: "c", choices: [{ index: 1, text: "x" }] })));
  assert.equal(two.read().blocked, "more than one choice");
});

Deno.test("continuation: the rest is asked with the text so far and a budget less the pieces sent", () => {
  const s = {
    id: "c1",
    created: 7,
    model: "m",
    text: "Hello wor",
    pieces: 3,
    finished: false,
    blocked: null,
  };
  const c = continuationBody("chat", { ...chat, max_tokens: 10, max_completion_tokens: 8 }, s)!;
  assert.deepEqual(c.messages, [...chat.messages, { role: "assistant", content: "Hello wor" }]);
  assert.equal(c.continue_final_message, true);
  assert.equal(c.add_generation_prompt, false);
  assert.equal(c.max_tokens, 7);
  assert.equal(c.max_completion_tokens, 5);
  const p = continuationBody("completions", { prompt: "Say:\n", max_tokens: 4 }, s)!;
  assert.equal(p.prompt, "Say:\nHello wor");
  assert.equal(p.max_tokens, 1);
  assert.equal(continuationBody("completions", { prompt: "p", max_tokens: 3 }, s), null, "spent");
  const none = continuationBody("chat", chat, { ...s, text: "", pieces: 0 })!;
  assert.deepEqual(none.messages, chat.messages, "nothing sent: asked again as it was");
});

Deno.test("continuation: the continuing worker's events become the client's stream's", () => {
  const s = {
    id: "c1",
    created: 7,
    model: "m",
    text: "ab",
    pieces: 2,
    finished: false,
    blocked: null,
  };
  const rw = new Rewriter(s, "chat");
  const first = chunk({
    id: "other",
    created: 9,
    model: "m2",
    choices: [{ index: 0, delta: { role: "assistant", content: "" } }],
  });
  const second = piece("cd").replace('"c1"', '"other"');
  const usage = chunk({
    id: "other",
    choices: [],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
  });
  // Split mid-event: the rest is held until whole.
  const all = first + second + usage + "data: [DONE]\n\n";
  const out = dec.decode(rw.push(enc.encode(all.slice(0, 30)))) +
    dec.decode(rw.push(enc.encode(all.slice(30))));
  const events = out.split("\n\n").filter((e) => e).map((e) => e.slice(6));
  assert.equal(events.at(-1), "[DONE]");
  const objs = events.slice(0, -1).map((e) => JSON.parse(e));
  assert.ok(objs.every((o) => o.id === "c1" && (o.created === 7 || o.created === undefined)));
  assert.deepEqual(objs[0].choices[0].delta, { content: "" }, "no second role");
  assert.equal(objs[1].choices[0].delta.content, "cd");
  assert.deepEqual(objs[2].usage, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
});

/** A source of `chunks`, then a break. */
function breaking(chunks: string[]): ChunkSource {
  const q = chunks.map((c) => enc.encode(c));
  return {
    read: () => q.length ? Promise.resolve(q.shift()!) : Promise.reject(new Error("reset")),
    cancel() {},
  };
}

Deno.test("relay: with a continuer, only whole events reach the client; a break goes on from its source", async () => {
  const sent: string[] = [];
  const rest = [piece("c"), "data: [DONE]\n\n"].map((c) => enc.encode(c));
  const continuer: Continuer = {
    sent: (c) => void sent.push(dec.decode(c)),
    next: () =>
      Promise.resolve({
        read: () => Promise.resolve(rest.shift() ?? null),
        cancel() {},
      }),
  };
  const ends: string[] = [];
  const half = piece("b");
  const relay = new SseRelay(
    enc.encode(piece("a", true)),
    breaking([half.slice(0, 10)]),
    "http://w",
    (how) => ends.push(how),
    { continuer },
  );
  let out = "";
  for (let c = await relay.read(); c !== null; c = await relay.read()) out += dec.decode(c);
  assert.equal(
    out,
    piece("a", true) + piece("c") + "data: [DONE]\n\n",
    "the half event never sent",
  );
  assert.equal(sent.join(""), out, "the transcript holds all the client got, continued parts too");
  assert.deepEqual(ends, ["error"], "the first worker's part ended broken");
});

Deno.test("relay: a relay read by a relay rejects on a break instead of sending an error event", async () => {
  const relay = new SseRelay(enc.encode(piece("a")), breaking([]), "http://w", () => {}, {
    errorEvents: false,
  });
  await relay.read();
  await assert.rejects(relay.read(), /reset/);
});
