/**
 * Requests for a model that gRPC workers serve are tokenized before routing: the policy's
 * `RouteRequest` carries the exact token ids the gateway computed (chat template applied), the
 * same ids reach the worker, and the prompt is encoded once even when a retry goes to a second
 * worker. Models with only HTTP workers are not tokenized.
 */

import assert from "node:assert/strict";
import { ManualClock, seededRandom } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { RouteRequest, WorkerView } from "../../lib/core/types.ts";
import type { GenerateStream } from "../../lib/grpc/sglang_client.ts";
import type { GenerateRequestPb, GenerateResponsePb } from "../../lib/grpc/sglang_proto.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import type { Policy } from "../../lib/policies/policy.ts";
import { Admission } from "../../lib/proxy/admission.ts";
import type { GenerateClient } from "../../lib/proxy/grpc_attempt.ts";
import { InferenceProxy } from "../../lib/proxy/proxy.ts";
import { RequestInbound, toResponse } from "../../lib/server/inbound.ts";
import { FetchUpstream } from "../../lib/upstream/fetch_upstream.ts";
import { testConfig } from "../support/gateway.ts";
import { qwen3 } from "../support/qwen3.ts";
import { workerSetup } from "../support/workers.ts";

/** A policy that records what it was asked and picks the first candidate. */
class SpyPolicy implements Policy {
  // A policy name from the closed list (metrics labels); the behaviour is the spy's.
  readonly name = "round_robin";
  readonly needs = { requestText: true, backendLoads: false };
  readonly seen: (readonly number[] | null)[] = [];
  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    this.seen.push(request.tokens);
    return candidates[0] ?? null;
  }
}

/** A worker whose `Generate` fails `failures` times with UNAVAILABLE, then completes. */
function fakeClient(sent: GenerateRequestPb[], failures: number): GenerateClient {
  return {
    generate(req): GenerateStream {
      sent.push(req);
      const fail = sent.length <= failures;
      let done = false;
      return {
        next(): Promise<GenerateResponsePb | null> {
          if (fail) return Promise.reject(Object.assign(new Error("down"), { code: 14 }));
          if (done) return Promise.resolve(null);
          done = true;
          return Promise.resolve({
            request_id: req.request_id,
            response: "complete",
            complete: {
              output_ids: [9707],
              finish_reason: "length",
              prompt_tokens: req.tokenized.input_ids.length,
              completion_tokens: 1,
              cached_tokens: 0,
              reasoning_tokens: 0,
              index: 0,
            },
          });
        },
        cancel() {},
      };
    },
    abort: () => Promise.resolve(),
  };
}

function setup(urls: string[], failures = 0) {
  const config = testConfig({ retry: { initialBackoffMs: 0, maxBackoffMs: 0 } });
  const clock = new ManualClock(1000);
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
  const client = fakeClient(sent, failures);
  const proxy = new InferenceProxy({
    config,
    registry,
    policies: { forModel: () => policy },
    metrics,
    log: silentLogger,
    clock,
    random: seededRandom(1),
    upstream: new FetchUpstream(() => Promise.reject(new Error("no HTTP here"))),
    admission: new Admission(config.admission, metrics),
    grpc: {
      client: () => client,
      tokenizer: {
        encode: (t, s) => (encodes++, tok.encode(t, s)),
        applyChatTemplate: (m, o) => tok.applyChatTemplate(m, o),
        decode: (ids, s) => tok.decode(ids, s),
        hasChatTemplate: true,
        maxLength: tok.maxLength,
      },
    },
  });
  const chat = async (content: string) => {
    const done = Promise.withResolvers<void>();
    const req = new Request("http://gw/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content }] }),
    });
    const ctx = { requestId: "r1", completed: done.promise };
    const res = toResponse(await proxy.handle(new RequestInbound(req), "chat", ctx));
    const json = await res.json();
    done.resolve();
    await done.promise;
    proxy.close();
    return { res, json };
  };
  return { policy, sent, chat, encodes: () => encodes };
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

Deno.test("grpc routing: a model with only HTTP workers is not tokenized", async () => {
  const s = setup(["http://127.0.0.1:8000"]);
  await s.chat("plain").catch(() => {});
  assert.deepEqual(s.policy.seen, [null]);
  assert.equal(s.encodes(), 0);
});
