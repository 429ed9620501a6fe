/**
 * A gRPC stream continued on another worker (`GrpcSse` with `hooks.resume`), with scripted calls
 * and a one-letter-per-id decoder: the client's text is the decode of every id in order, byte for
 * byte as an unbroken call giving the same ids would be, with one role, one usage (the original
 * prompt, every generated id) and `[DONE]`; the rest is asked with the ids generated so far.
 */

import assert from "node:assert/strict";
import type { GenerateStream } from "../../lib/grpc/sglang_client.ts";
import type { GenerateResponsePb } from "../../lib/grpc/sglang_proto.ts";
import type { GrpcInput } from "../../lib/proxy/grpc/request.ts";
import { type Adopted, GrpcSse } from "../../lib/proxy/grpc/sse.ts";

const decoder = { decode: (ids: readonly number[]) => ids.map((i) => "abcdefghij"[i]).join("") };

const input: GrpcInput = {
  ids: [1, 2, 3],
  text: "p",
  sampling: { max_new_tokens: 6 } as GrpcInput["sampling"],
  stops: [],
  noStopTrim: false,
  stopIds: new Set([9]),
  skipSpecial: true,
  endpoint: "chat",
  model: "m",
  includeUsage: true,
  stream: true,
};

const chunk = (ids: number[], prompt: number, completion: number): GenerateResponsePb =>
  ({
    chunk: { token_ids: ids, prompt_tokens: prompt, completion_tokens: completion },
  }) as unknown as GenerateResponsePb;

const complete = (prompt: number, completion: number): GenerateResponsePb =>
  ({
    complete: {
      output_ids: [],
      finish_reason: "length",
      prompt_tokens: prompt,
      completion_tokens: completion,
      cached_tokens: 0,
    },
  }) as unknown as GenerateResponsePb;

/** A call that gives `messages`, then breaks (`end: "break"`) or ends. */
function call(messages: GenerateResponsePb[], end: "break" | "end"): GenerateStream {
  const q = [...messages];
  return {
    next: () =>
      q.length > 0
        ? Promise.resolve(q.shift()!)
        : end === "break"
        ? Promise.reject(new Error("reset"))
        : Promise.resolve(null),
    cancel() {},
  };
}

async function readAll(sse: GrpcSse): Promise<string> {
  let out = "";
  const dec = new TextDecoder();
  for (let c = await sse.read(); c !== null; c = await sse.read()) out += dec.decode(c);
  return out;
}

function events(raw: string) {
  return raw.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) =>
    JSON.parse(e.slice(6))
  );
}

Deno.test("grpc sse: a broken call goes on from another, as one stream with every id's text", async () => {
  const asked: number[][] = [];
  const breaks: unknown[] = [];
  const rest = call([chunk([4, 5], 5, 2), chunk([6], 5, 3), complete(5, 3)], "end");
  const resume = (generated: readonly number[]): Promise<Adopted | null> => {
    asked.push([...generated]);
    return Promise.resolve({
      stream: rest,
      first: chunk([0], 5, 1),
      hooks: {},
      onBreak: () => {},
      onCancel: () => {},
    });
  };
  let usage = null;
  const sse = new GrpcSse(
    decoder,
    input,
    { endpoint: "chat", id: "r1", model: "m", created: 1 },
    call([chunk([2], 3, 2)], "break"),
    chunk([1], 3, 1),
    (u) => usage = u,
    (e) => breaks.push(e),
    () => {},
    { resume },
  );
  const raw = await readAll(sse);
  const evs = events(raw);
  const text = evs.map((e) => e.choices?.[0]?.delta?.content ?? "").join("");
  assert.equal(text, decoder.decode([1, 2, 0, 4, 5, 6]), "every id's text, in order");
  assert.deepEqual(asked, [[1, 2]], "the rest asked with the ids generated so far");
  assert.equal(breaks.length, 1, "the broken worker blamed once");
  assert.equal(new Set(evs.map((e) => e.id)).size, 1);
  assert.equal(evs.filter((e) => e.choices?.[0]?.delta?.role).length, 1, "the role once");
  assert.deepEqual(
    evs.find((e) => e.usage)?.usage,
    {
      prompt_tokens: 3,
      completion_tokens: 5,
      total_tokens: 8,
      prompt_tokens_details: { cached_tokens: 0 },
    },
    "the original prompt; 2 ids before the break and the 3 the next worker counted",
  );
  assert.match(raw, /data: \[DONE\]\n\n$/);
  assert.deepEqual(usage, { prompt: 3, completion: 5, cached: 0 });
});

Deno.test("grpc sse: with nowhere to go on, a broken call ends with one error event", async () => {
  const sse = new GrpcSse(
    decoder,
    input,
    { endpoint: "chat", id: "r1", model: "m", created: 1 },
    call([], "break"),
    chunk([1], 3, 1),
    () => {},
    () => {},
    () => {},
    { resume: () => Promise.resolve(null) },
  );
  const raw = await readAll(sse);
  assert.equal(raw.match(/event: error/g)?.length, 1);
});
