/**
 * sglang's scheduler service end to end on loopback: the gateway's `SglangClient` against the
 * simulated gRPC worker (`SimGrpcServer`) over real grpc-js channels. Streaming and not, token
 * counts and cached tokens, Qwen3 ids for the generated words, cancellation and `Abort`
 * reaching the engine, health, model and server info, loads, cache flush, a worker that dies
 * mid-stream, an unreachable worker and bad input as gRPC statuses.
 */

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import {
  type GenerateStream,
  GrpcCallError,
  retryableStatus,
  SglangClient,
} from "../../lib/grpc/sglang_client.ts";
import type { GenerateRequestPb, GenerateResponsePb } from "../../lib/grpc/sglang_proto.ts";
import { SimEngine } from "../../lib/sim/engine.ts";
import { type SimGrpcOptions, SimGrpcServer } from "../../lib/sim/grpc_server.ts";
import { realTime } from "../../lib/sim/worker.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { DEFAULTS, prompt } from "../../support/sim_engine.ts";
import { until } from "../../support/wait.ts";

/** A real-time engine: `timeScale` 1 with fast steps, so a stream lasts long enough to cancel. */
function engine(decodeBaseMs = 0.2) {
  return new SimEngine(
    { ...DEFAULTS, decodeBaseMs, decodePerReqMs: 0, prefillTps: 1e9 },
    realTime,
  );
}

async function withWorker(
  fn: (client: SglangClient, eng: SimEngine, server: SimGrpcServer) => Promise<void>,
  o: Partial<SimGrpcOptions> = {},
  decodeBaseMs?: number,
) {
  const eng = engine(decodeBaseMs);
  const server = new SimGrpcServer(eng, { model: "qwen3-sim", maxNewTokens: 8, ...o });
  const port = await server.serve("127.0.0.1", 0);
  const client = new SglangClient(`grpc://127.0.0.1:${port}`);
  try {
    await fn(client, eng, server);
  } finally {
    await client.close();
    await server.close();
    await eng.close();
  }
}

function request(ids: number[], o: Partial<GenerateRequestPb> = {}): GenerateRequestPb {
  return {
    request_id: "r1",
    tokenized: { original_text: "", input_ids: ids },
    sampling_params: {
      temperature: 1,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      frequency_penalty: 0,
      presence_penalty: 0,
      repetition_penalty: 1,
      max_new_tokens: 6,
      stop: [],
      stop_token_ids: [],
      skip_special_tokens: true,
      spaces_between_special_tokens: true,
      n: 1,
      min_new_tokens: 0,
      ignore_eos: false,
      no_stop_trim: false,
      logit_bias: {},
    },
    return_logprob: false,
    logprob_start_len: -1,
    top_logprobs_num: 0,
    lora_id: "",
    data_parallel_rank: 0,
    stream: false,
    require_reasoning: false,
    ...o,
  };
}

async function drain(s: GenerateStream): Promise<GenerateResponsePb[]> {
  const out: GenerateResponsePb[] = [];
  for (let m = await s.next(); m !== null; m = await s.next()) out.push(m);
  return out;
}

Deno.test("grpc: a streamed generation is chunks then a complete with usage", async () => {
  await withWorker(async (client) => {
    const msgs = await drain(client.generate(request(prompt(1, 64), { stream: true })));
    const chunks = msgs.filter((m) => m.response === "chunk");
    const last = msgs[msgs.length - 1];
    assert.equal(chunks.length, 6);
    assert.equal(last.response, "complete");
    assert.deepEqual(last.complete!.output_ids, []);
    assert.equal(last.complete!.finish_reason, "length");
    assert.equal(last.complete!.prompt_tokens, 64);
    assert.equal(last.complete!.completion_tokens, 6);
    assert.deepEqual(chunks.map((c) => c.chunk!.completion_tokens), [1, 2, 3, 4, 5, 6]);
  });
});

Deno.test("grpc: not streamed, one complete with every output id; a repeat is cached", async () => {
  await withWorker(async (client) => {
    const first = await drain(client.generate(request(prompt(2, 64))));
    assert.equal(first.length, 1);
    assert.equal(first[0].complete!.output_ids.length, 6);
    assert.equal(first[0].complete!.cached_tokens, 0);
    const again = await drain(client.generate(request(prompt(2, 64))));
    assert.equal(again[0].complete!.cached_tokens, 48, "three whole 16-token blocks");
  });
});

Deno.test("grpc: with a tokenizer, the generated ids are Qwen3's and decode to words", async () => {
  const tok = qwen3();
  await withWorker(async (client) => {
    const [m] = await drain(client.generate(request(prompt(3, 32))));
    const text = tok.decode(m.complete!.output_ids);
    assert.match(text, /^[a-z]+( [a-z]+)* ?$/, text);
  }, { encodeOutput: (t) => tok.encode(t, false) });
});

Deno.test("grpc: cancelling the stream aborts the engine request; so does Abort by id", async () => {
  await withWorker(async (client, eng) => {
    const cancel = new Cancel();
    const s = client.generate(
      request(prompt(4, 32), {
        stream: true,
        sampling_params: { ...request([]).sampling_params, max_new_tokens: 100_000 },
      }),
      cancel,
    );
    assert.equal((await s.next())?.response, "chunk");
    cancel.cancel(new Error("client left"));
    await assert.rejects(
      s.next(),
      (e: unknown) => (e as GrpcCallError).code === grpc.status.CANCELLED,
    );
    const aborted = () => eng.stats().totals.aborted > 0;
    await until(aborted, (l) => eng.onFinish(l), "the engine to abort the request");
    assert.equal(eng.stats().totals.aborted, 1);

    const s2 = client.generate(
      request(prompt(5, 32), {
        request_id: "long",
        stream: true,
        sampling_params: { ...request([]).sampling_params, max_new_tokens: 100_000 },
      }),
    );
    assert.equal((await s2.next())?.response, "chunk");
    assert.equal((await client.abort("long", "test")).success, true);
    const rest = await drain(s2);
    assert.equal(rest[rest.length - 1].complete?.finish_reason, "abort");
    assert.equal((await client.abort("nobody", "test")).success, false);
  });
});

Deno.test("grpc: health, model info, server info, loads and flush", async () => {
  await withWorker(async (client) => {
    assert.deepEqual(await client.healthCheck(1000), { healthy: true, message: "ok" });
    const info = await client.modelInfo(1000);
    assert.equal(info.served_model_name, "qwen3-sim");
    assert.deepEqual(info.eos_token_ids, [151645]);
    assert.equal(info.vocab_size, 151669);
    const server = await client.serverInfo(1000);
    assert.equal(server.server_type, "grpc");
    assert.deepEqual(
      (server.server_args as Record<string, unknown>).served_model_name,
      "qwen3-sim",
    );
    const loads = await client.loads(1000);
    assert.equal(loads.dp_rank_count, 1);
    assert.equal(loads.loads[0].num_running_reqs, 0);
    assert.equal(loads.loads[0].max_total_num_tokens, DEFAULTS.kvTokens);
    assert.equal((await client.flushCache(1000)).success, true);
  }, { vocabSize: 151669, eosTokenIds: [151645] });
});

Deno.test("grpc: a worker that dies mid-stream ends the stream with UNAVAILABLE", async () => {
  await withWorker(async (client) => {
    const ok = await drain(client.generate(request(prompt(6, 32), { stream: true })));
    assert.equal(ok[ok.length - 1].response, "complete");
    const s = client.generate(request(prompt(7, 32), { stream: true }));
    const err = await drain(s).then(() => null, (e) => e as GrpcCallError);
    assert.ok(err instanceof GrpcCallError);
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.ok(retryableStatus(err.code));
  }, { dieAfter: 1 });
});

Deno.test("grpc: bad input is INVALID_ARGUMENT, not retried; a non-gRPC URL is refused", async () => {
  await withWorker(async (client) => {
    const err = await drain(client.generate(request([]))).then(
      () => null,
      (e) => e as GrpcCallError,
    );
    assert.equal(err?.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(retryableStatus(err!.code), false);
  });
  assert.throws(() => new SglangClient("http://127.0.0.1:1"), /not a gRPC worker URL/);
});

Deno.test("sglang grpc: SubscribeKvEvents streams the blocks a generation stored, and replays after a cursor", async () => {
  await withWorker(async (client, eng, server) => {
    const bs = eng.config.blockSize;
    const subscribed = Promise.withResolvers<void>();
    server.onKvSubscribe = subscribed.resolve;
    const sub = client.subscribeKvEvents(0);
    await subscribed.promise; // the log records from its first subscriber on
    const ids = prompt(7, 4 * bs + 3);
    await drain(client.generate(request(ids)));
    const first = await sub.next();
    assert.ok(first !== null && first.sequence_number >= 1);
    const stored = first.events.filter((e) => e.data === "stored").flatMap((e) => e.stored!.blocks);
    assert.ok(stored.length >= 4, "the prompt's full blocks");
    assert.deepEqual(stored[0].token_ids, ids.slice(0, bs));
    assert.equal(stored[0].block_size, bs);
    assert.match(stored[0].block_hash, /^\d+$/, "a decimal string");
    await drain(client.generate(request(prompt(8, 2 * bs))));
    // Every batch numbered in order, up to the engine's last.
    let last = first.sequence_number;
    while (last < eng.kvEvents.seq) {
      const b = await sub.next();
      assert.equal(b?.sequence_number, last + 1);
      last = b!.sequence_number;
    }
    sub.cancel();
    // A subscription from a cursor replays what came after it.
    const again = client.subscribeKvEvents(first.sequence_number);
    assert.equal((await again.next())?.sequence_number, first.sequence_number + 1);
    again.cancel();
  });
});
