/**
 * Requests for a model that gRPC workers serve are tokenized before routing: the policy's
 * `RouteRequest` carries the exact token ids the gateway computed (chat template applied), the
 * same ids reach the worker, and the prompt is encoded once even when a retry goes to a second
 * worker. Models with only HTTP workers are not tokenized.
 */

import assert from "node:assert/strict";
import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { RouteRequest, WorkerView } from "../../lib/core/types.ts";
import type { GenerateStream } from "../../lib/grpc/sglang_client.ts";
import type { GenerateRequestPb, GenerateResponsePb } from "../../lib/grpc/sglang_proto.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import type { Policy } from "../../lib/policies/policy.ts";
import { Admission } from "../../lib/proxy/admission.ts";
import type { GenerateClient } from "../../lib/proxy/types.ts";
import { InferenceProxy, KV_ENCODE_MAX_CHARS } from "../../lib/proxy/proxy.ts";
import { RequestInbound, toResponse } from "../../lib/server/inbound.ts";
import { FetchUpstream } from "../../lib/upstream/fetch_upstream.ts";
import { testConfig } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { workerSetup } from "../support/workers.ts";

/** A policy that records what it was asked and picks the first candidate. */
class SpyPolicy implements Policy {
  // A policy name from the closed list (metrics labels); the behaviour is the spy's.
  readonly name = "round_robin";
  readonly needs = { requestText: true, backendLoads: false };
  readonly seen: (readonly number[] | null)[] = [];
  readonly tokenized: (boolean | undefined)[] = [];
  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    this.seen.push(request.tokens);
    this.tokenized.push(request.tokenizedText);
    return candidates[0] ?? null;
  }
}

/** What the fake worker answers: its output ids, finish and matched stop token. */
interface Script {
  output: number[];
  finish?: string;
  matchedTokenId?: number;
}

/**
 * A worker whose `Generate` fails `failures` times with UNAVAILABLE, then answers `script`:
 * one chunk per id and a `complete` repeating the last chunk's ids when streaming (as sglang's
 * servicer does), else one `complete` with every id. Counts cancelled calls.
 */
function fakeClient(
  sent: GenerateRequestPb[],
  failures: number,
  script: Script = { output: [9707] },
  cancels = { n: 0 },
): GenerateClient {
  return {
    generate(req): GenerateStream {
      sent.push(req);
      const fail = sent.length <= failures;
      const out = script.output;
      const complete = (ids: number[]): GenerateResponsePb => ({
        request_id: req.request_id,
        response: "complete",
        complete: {
          output_ids: ids,
          finish_reason: script.finish ?? "length",
          prompt_tokens: req.tokenized.input_ids.length,
          completion_tokens: out.length,
          cached_tokens: 0,
          reasoning_tokens: 0,
          index: 0,
          ...(script.matchedTokenId !== undefined
            ? { matched_token_id: script.matchedTokenId, matched_stop: "matched_token_id" as const }
            : {}),
        },
      });
      const msgs: GenerateResponsePb[] = req.stream
        ? [
          ...out.map((id, i): GenerateResponsePb => ({
            request_id: req.request_id,
            response: "chunk",
            chunk: {
              token_ids: [id],
              prompt_tokens: req.tokenized.input_ids.length,
              completion_tokens: i + 1,
              cached_tokens: 0,
              reasoning_tokens: 0,
              index: 0,
            },
          })),
          complete(out.slice(-1)),
        ]
        : [complete(out)];
      return {
        next(): Promise<GenerateResponsePb | null> {
          if (fail) return Promise.reject(Object.assign(new Error("down"), { code: 14 }));
          return Promise.resolve(msgs.shift() ?? null);
        },
        cancel() {
          cancels.n++;
        },
      };
    },
    abort: () => Promise.resolve(),
  };
}

function setup(
  urls: string[],
  failures = 0,
  script?: Script,
  routesOnTokens?: (model: string) => boolean,
  pendingChars?: (text: string) => number,
) {
  const config = testConfig({ retry: { initialBackoffMs: 0, maxBackoffMs: 0 } });
  const clock = new FakeClock(1000);
  const { registry, manager } = workerSetup(clock, {
    health: config.health,
    circuitBreaker: config.circuitBreaker,
  });
  for (const url of urls) manager.add({ url, models: ["m"] }).setStatus("ready");
  const metrics = new Metrics();
  const policy = new SpyPolicy();
  const sent: GenerateRequestPb[] = [];
  let encodes = 0;
  const tok = qwen3();
  const cancels = { n: 0 };
  const client = fakeClient(sent, failures, script, cancels);
  const proxy = new InferenceProxy({
    config,
    registry,
    policies: { forModel: () => policy },
    metrics,
    log: silentLogger,
    clock,
    random: seededRandom(1),
    upstream: new FetchUpstream(() => Promise.reject(new Error("no HTTP here"))),
    admission: new Admission(config.admission, metrics, clock),
    grpc: {
      client: () => client,
      tokenizer: {
        encode: (t, s) => (encodes++, tok.encode(t, s)),
        pendingChars,
        applyChatTemplate: (m, o) => tok.applyChatTemplate(m, o),
        decode: (ids, s) => tok.decode(ids, s),
        hasChatTemplate: true,
        maxLength: tok.maxLength,
        eosTokenIds: tok.eosTokenIds,
      },
    },
    routesOnTokens,
  });
  const send = async (body: Record<string, unknown>) => {
    const done = Promise.withResolvers<void>();
    const req = new Request("http://gw/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: "m", ...body }),
    });
    const ctx = { requestId: "r1", completed: done.promise };
    const res = toResponse(await proxy.handle(new RequestInbound(req), "chat", ctx));
    const text = await res.text();
    done.resolve();
    await done.promise;
    proxy.close();
    return { res, text, json: () => JSON.parse(text) };
  };
  const chat = async (content: string) => {
    const r = await send({ messages: [{ role: "user", content }] });
    return { res: r.res, json: r.json() };
  };
  const inFlight = () => registry.all().map((w) => w.inFlight);
  return { policy, sent, chat, send, cancels, inFlight, encodes: () => encodes };
}

Deno.test("grpc routing: the policy sees the exact prompt tokens, and the worker gets the same", async () => {
  const s = setup(["grpc://127.0.0.1:50051"]);
  const { res, json } = await s.chat("Hello, world!");
  assert.equal(res.status, 200);
  const want = qwen3().encode(
    qwen3().applyChatTemplate([{ role: "user", content: "Hello, world!" }]),
    false,
  );
  assert.deepEqual(s.policy.seen, [want]);
  assert.deepEqual(s.sent[0].tokenized.input_ids, want);
  assert.equal(json.usage.prompt_tokens, want.length);
  assert.equal(json.choices[0].message.content, "Hello");
});

Deno.test("grpc routing: a retry on another worker reuses the tokens (one encode)", async () => {
  const s = setup(["grpc://127.0.0.1:50051", "grpc://127.0.0.1:50052"], 1);
  const { res } = await s.chat("retry me");
  assert.equal(res.status, 200);
  assert.equal(s.sent.length, 2);
  assert.deepEqual(s.sent[0].tokenized.input_ids, s.sent[1].tokenized.input_ids);
  assert.equal(s.encodes(), 1);
});

Deno.test("grpc routing: in a mixed fleet the first gRPC attempt tokenizes, and a retry reuses it", async () => {
  const s = setup(["grpc://127.0.0.1:50051", "grpc://127.0.0.1:50052", "http://127.0.0.1:8000"], 1);
  const { res } = await s.chat("mixed retry");
  assert.equal(res.status, 200);
  assert.deepEqual(s.policy.seen, [null, null], "routed on text, twice");
  assert.equal(s.sent.length, 2);
  assert.equal(s.encodes(), 1);
});

Deno.test("grpc routing: a model with only HTTP workers is not tokenized", async () => {
  const s = setup(["http://127.0.0.1:8000"]);
  await s.chat("plain").catch(() => {});
  assert.deepEqual(s.policy.seen, [null]);
  assert.equal(s.encodes(), 0);
});

Deno.test("grpc routing: HTTP workers whose KV events the gateway indexes are routed on the prompt's tokens", async () => {
  const s = setup(["http://127.0.0.1:8000"], 0, undefined, (model) => model === "m");
  await s.chat("indexed").catch(() => {});
  const want = qwen3().encode(
    qwen3().applyChatTemplate([{ role: "user", content: "indexed" }]),
    false,
  );
  assert.deepEqual(s.policy.seen, [want]);
  assert.equal(s.sent.length, 0, "still sent over HTTP, not gRPC");
});

Deno.test("grpc routing: KV-indexed HTTP workers: a long prompt not in the tokenizer's cache routes on text at once; one that is, on its tokens", async () => {
  let pending = 0;
  const s = setup(
    ["http://127.0.0.1:8000"],
    0,
    undefined,
    (model) => model === "m",
    (text) => (pending = text.length > 10_000 && !text.includes("cached") ? text.length : 0),
  );
  const long = "a long document ".repeat(1000); // 16,000 characters
  await s.chat(long).catch(() => {});
  assert.ok(pending > KV_ENCODE_MAX_CHARS);
  assert.deepEqual(s.policy.seen, [null], "routed on its text");
  assert.equal(s.encodes(), 0, "and not encoded: no request waits for a long encode");
  await s.chat(long + " cached").catch(() => {});
  assert.equal(s.policy.seen.length, 2);
  const tokens = s.policy.seen.at(-1) as readonly number[] | null;
  assert.ok(tokens !== null && tokens.length > 1000, "on its tokens");
  assert.equal(s.policy.tokenized.at(-1), true, "marked as the gateway's tokens of its text");
});

Deno.test("grpc routing: a model with HTTP workers too routes on text (HTTP-only requests still go)", async () => {
  const s = setup(["grpc://127.0.0.1:50051", "http://127.0.0.1:8000"]);
  await s.chat("mixed").catch(() => {});
  assert.deepEqual(s.policy.seen, [null]);
});

const hi = [{ role: "user", content: "hi" }];

Deno.test("grpc answers: the matched stop token is trimmed, streaming and not; no_stop_trim keeps it", async () => {
  const eos = 151645;
  const script = { output: [9707, eos], finish: "stop", matchedTokenId: eos };
  for (const stream of [false, true]) {
    const s = setup(["grpc://127.0.0.1:50051"], 0, script);
    const r = await s.send({ messages: hi, stream, skip_special_tokens: false });
    assert.equal(r.res.status, 200);
    assert.ok(!r.text.includes("<|im_end|>"), r.text);
    assert.match(r.text, /Hello/);
    const keep = setup(["grpc://127.0.0.1:50051"], 0, script);
    const k = await keep.send({
      messages: hi,
      stream,
      skip_special_tokens: false,
      no_stop_trim: true,
    });
    assert.match(k.text, /<\|im_end\|>/);
  }
  const ids = setup(["grpc://127.0.0.1:50051"], 0, {
    output: [9707, 11, 1879],
    matchedTokenId: 1879,
    finish: "stop",
  });
  const r = await ids.send({ messages: hi, stop_token_ids: [1879] });
  assert.equal(r.json().choices[0].message.content, "Hello,");
});

Deno.test("grpc answers: a completed non-streamed call is not cancelled (sglang would log an abort)", async () => {
  const s = setup(["grpc://127.0.0.1:50051"]);
  await s.chat("hello");
  assert.equal(s.cancels.n, 0);
});

Deno.test("grpc answers: bad sampling is a 400 and frees the worker; tool-call turns render", async () => {
  const s = setup(["grpc://127.0.0.1:50051"]);
  for (
    const [body, param] of [
      [{ messages: hi, top_k: 1.5 }, "top_k"],
      [{ messages: hi, regex: "a+", response_format: { type: "json_object" } }, "response_format"],
      [{ messages: hi, max_tokens: 2 ** 32 + 5 }, "max_tokens"],
    ] as const
  ) {
    const r = await s.send(body);
    assert.equal(r.res.status, 400, JSON.stringify(body));
    assert.equal(r.json().error.param, param);
  }
  assert.deepEqual(s.inFlight(), [0]);
  const tools = await s.send({
    messages: [
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "w", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "sunny" },
    ],
  });
  assert.equal(tools.res.status, 200, tools.text);
});
