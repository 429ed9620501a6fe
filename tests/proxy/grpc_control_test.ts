/**
 * The gRPC worker control against a fake `SglangClient`: each call is its RPC on the worker's
 * client with the call's timeout as deadline; health is 200 "OK" or 503 with the worker's
 * message whatever the probe endpoint; discovery and loads read the RPCs' messages; the info
 * pass-throughs are them as JSON; a refused flush is a 400; a failed RPC, a timeout, an abort and
 * a gateway without gRPC support are results with the error's text, never a throw. And a worker
 * in the same state answers the same over gRPC as over HTTP.
 */

import assert from "node:assert/strict";
import { GrpcCallError, type SglangClient } from "../../lib/grpc/sglang_client.ts";
import type {
  AckPb,
  HealthCheckResponsePb,
  LoadsPb,
  ModelInfoPb,
  ServerInfoPb,
} from "../../lib/grpc/sglang_proto.ts";
import { grpcWorkerControl } from "../../lib/proxy/grpc/control.ts";
import type { WorkerControl } from "../../lib/workers/control.ts";
import type { FetchFn } from "../../lib/workers/http.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";

const MODEL_INFO: ModelInfoPb = {
  model_path: "/models/qwen3",
  tokenizer_path: "/models/qwen3",
  is_generation: true,
  served_model_name: "qwen3",
  max_context_length: 4096,
  vocab_size: 151_936,
  model_type: "qwen3",
  eos_token_ids: [151_645],
  pad_token_id: 0,
  bos_token_id: 0,
  max_req_input_len: 4000,
  architectures: ["Qwen3ForCausalLM"],
  default_sampling_params_json: "{}",
};

const SERVER_INFO: ServerInfoPb = {
  server_args: { tp_size: 1 },
  scheduler_info: { max_total_num_tokens: 1 },
  active_requests: 0,
  is_paused: false,
  uptime_seconds: 12,
  sglang_version: "0.5.0",
  server_type: "grpc",
  max_total_num_tokens: 8192,
};

const rank = (dp: number, running: number, waiting: number, used: number) => ({
  dp_rank: dp,
  num_running_reqs: running,
  num_waiting_reqs: waiting,
  num_total_reqs: running + waiting,
  num_used_tokens: used,
  max_total_num_tokens: 8192,
  token_usage: used / 8192,
  gen_throughput: 10,
  cache_hit_rate: 0.5,
  utilization: 0.1,
  max_running_requests: 64,
  num_waiting_uncached_tokens: 3,
});

const LOADS: LoadsPb = {
  timestamp: "2025-01-01T00:00:00Z",
  version: "1",
  dp_rank_count: 2,
  loads: [rank(0, 2, 1, 1024), rank(1, 1, 0, 2048)],
};

/** What the fake worker answers: a value, or a function that throws or never settles. */
interface Script {
  health: HealthCheckResponsePb | (() => Promise<HealthCheckResponsePb>);
  modelInfo: ModelInfoPb | (() => Promise<ModelInfoPb>);
  serverInfo: ServerInfoPb | (() => Promise<ServerInfoPb>);
  loads: LoadsPb | (() => Promise<LoadsPb>);
  flush: AckPb | (() => Promise<AckPb>);
}

const HEALTHY: Script = {
  health: { healthy: true, message: "" },
  modelInfo: MODEL_INFO,
  serverInfo: SERVER_INFO,
  loads: LOADS,
  flush: { success: true, message: "Cache flushed" },
};

/** A gRPC control over one fake client per URL, recording each RPC with its URL and deadline. */
function fake(over: Partial<Script> = {}) {
  const s = { ...HEALTHY, ...over };
  const rpcs: string[] = [];
  const answer = <T>(url: string, name: string, v: T | (() => Promise<T>), ms: number) => {
    rpcs.push(`${url} ${name} ${ms}`);
    return typeof v === "function" ? (v as () => Promise<T>)() : Promise.resolve(v);
  };
  const client = (url: string) =>
    ({
      healthCheck: (ms: number) => answer(url, "HealthCheck", s.health, ms),
      modelInfo: (ms: number) => answer(url, "GetModelInfo", s.modelInfo, ms),
      serverInfo: (ms: number) => answer(url, "GetServerInfo", s.serverInfo, ms),
      loads: (ms: number) => answer(url, "GetLoads", s.loads, ms),
      flushCache: (ms: number) => answer(url, "FlushCache", s.flush, ms),
    }) as unknown as SglangClient;
  return { control: grpcWorkerControl(client), rpcs };
}

const W = { url: "grpc://10.0.0.1:30000", apiKey: null };
const CALL = { timeoutMs: 2500 };
const unavailable = () => Promise.reject(new GrpcCallError(14, "connect ECONNREFUSED"));
const never = () => new Promise<never>(() => {});

Deno.test("grpc control: a probe is HealthCheck, 200 OK or 503 with the worker's message", async () => {
  const up = fake();
  assert.deepEqual(await up.control.probe(W, "/health", CALL), { status: 200, text: "OK" });
  assert.deepEqual(await up.control.probe(W, "/healthz", CALL), { status: 200, text: "OK" });
  assert.deepEqual(await up.control.healthGenerate(W, CALL), { status: 200, text: "OK" });
  assert.deepEqual(up.rpcs, Array(3).fill(`${W.url} HealthCheck 2500`), "deadline: the timeout");
  const down = fake({ health: { healthy: false, message: "scheduler stuck" } });
  assert.deepEqual(await down.control.probe(W, "/health", CALL), {
    status: 503,
    text: "scheduler stuck",
  });
  assert.deepEqual(await down.control.healthGenerate(W, CALL), {
    status: 503,
    text: "scheduler stuck",
  });
});

Deno.test("grpc control: models are the served name, else the model path; null when none or on failure", async () => {
  assert.deepEqual(await fake().control.models(W, CALL), ["qwen3"]);
  const unnamed = fake({ modelInfo: { ...MODEL_INFO, served_model_name: "" } });
  assert.deepEqual(await unnamed.control.models(W, CALL), ["/models/qwen3"]);
  const blank = fake({ modelInfo: { ...MODEL_INFO, served_model_name: "", model_path: "" } });
  assert.equal(await blank.control.models(W, CALL), null, "serves any model");
  const failing = fake({ modelInfo: unavailable });
  assert.equal(await failing.control.models(W, CALL), null);
  assert.deepEqual(failing.rpcs, [`${W.url} GetModelInfo 2500`]);
});

Deno.test("grpc control: KV capacity is GetServerInfo's max_total_num_tokens, null when 0 or failing", async () => {
  assert.equal(await fake().control.kvCapacity(W, CALL), 8192);
  const unset = fake({ serverInfo: { ...SERVER_INFO, max_total_num_tokens: 0 } });
  assert.equal(await unset.control.kvCapacity(W, CALL), null);
  assert.equal(await fake({ serverInfo: unavailable }).control.kvCapacity(W, CALL), null);
});

Deno.test("grpc control: the load report is GetLoads summed over ranks; null when empty or failing", async () => {
  const absent = new Set<"loads" | "get_load" | "metrics">();
  const t = fake();
  const snap = await t.control.load(W, { ...CALL, absent });
  assert.equal(snap?.source, "loads");
  assert.equal(snap?.runningRequests, 3);
  assert.equal(snap?.waitingRequests, 1);
  assert.equal(snap?.usedTokens, 3072);
  assert.equal(snap?.maxTokens, 16384);
  assert.equal(snap?.waitingUncachedTokens, 6);
  assert.deepEqual(snap?.details, LOADS.loads, "the ranks, as /get_loads shows them");
  assert.deepEqual(t.rpcs, [`${W.url} GetLoads 2500`]);
  assert.equal(absent.size, 0, "no HTTP source is ruled out");
  assert.equal(await fake({ loads: { ...LOADS, loads: [] } }).control.load(W, CALL), null);
  assert.equal(await fake({ loads: unavailable }).control.load(W, CALL), null);
});

Deno.test("grpc control: server and model info pass through as the RPC's message in JSON", async () => {
  const t = fake();
  const server = await t.control.serverInfo(W, CALL);
  assert.equal(server.status, 200);
  assert.deepEqual(JSON.parse(server.text), SERVER_INFO);
  const model = await t.control.modelInfo(W, CALL);
  assert.equal(model.status, 200);
  assert.deepEqual(JSON.parse(model.text), MODEL_INFO);
  const down = await fake({ serverInfo: unavailable }).control.serverInfo(W, CALL);
  assert.deepEqual(down, { status: 0, text: "", error: "gRPC UNAVAILABLE: connect ECONNREFUSED" });
});

Deno.test("grpc control: a flush is FlushCache, 200 when done and 400 with the message when refused", async () => {
  const t = fake();
  assert.deepEqual(await t.control.flushCache(W, CALL), { status: 200, text: "Cache flushed" });
  assert.deepEqual(t.rpcs, [`${W.url} FlushCache 2500`]);
  const busy = fake({ flush: { success: false, message: "requests in flight" } });
  assert.deepEqual(await busy.control.flushCache(W, CALL), {
    status: 400,
    text: "requests in flight",
  });
});

Deno.test("grpc control: a failed RPC, a timeout and an abort are results with the error, never a throw", async () => {
  const failed = await fake({ health: unavailable }).control.probe(W, "/health", CALL);
  assert.deepEqual(failed, {
    status: 0,
    text: "",
    error: "gRPC UNAVAILABLE: connect ECONNREFUSED",
  });

  const deadline = () => Promise.reject(new GrpcCallError(4, "Deadline exceeded"));
  const late = await fake({ health: deadline }).control.probe(W, "/health", CALL);
  assert.deepEqual(late, { status: 0, text: "", error: "timed out after 2500 ms" });

  const hung = await fake({ health: never }).control.probe(W, "/health", { timeoutMs: 5 });
  assert.deepEqual(hung, { status: 0, text: "", error: "timed out after 5 ms" });

  const stop = new AbortController();
  const pending = fake({ loads: never }).control.load(W, {
    timeoutMs: 60_000,
    signal: stop.signal,
  });
  stop.abort(new Error("shutting down"));
  assert.equal(await pending, null, "the wait ends with the signal, not the deadline");
  const gone = await fake().control.serverInfo(W, { timeoutMs: 60_000, signal: stop.signal });
  assert.deepEqual(gone, { status: 0, text: "", error: "shutting down" }, "no RPC once aborted");

  const unsupported = grpcWorkerControl((url) => {
    throw new Error(`gRPC worker ${url} without gRPC support`);
  });
  assert.deepEqual(await unsupported.flushCache(W, CALL), {
    status: 0,
    text: "",
    error: `gRPC worker ${W.url} without gRPC support`,
  });
});

/** An HTTP worker in the state `HEALTHY` describes, as sglang's HTTP server shows it. */
const httpWorker: FetchFn = (url) => {
  const path = new URL(url).pathname;
  const routes: Record<string, () => Response> = {
    "/health": () => new Response("OK"),
    "/health_generate": () => new Response("OK"),
    "/v1/models": () => Response.json({ object: "list", data: [{ id: "qwen3" }] }),
    "/get_model_info": () => Response.json(MODEL_INFO),
    "/get_server_info": () => Response.json(SERVER_INFO),
    "/v1/loads": () => Response.json(LOADS),
    "/flush_cache": () => new Response("Cache flushed"),
  };
  return Promise.resolve(routes[path]?.() ?? new Response("not found", { status: 404 }));
};

/** Everything a control says about a worker, in comparable form. */
async function everything(c: WorkerControl, url: string) {
  const w = { url, apiKey: null };
  const load = await c.load(w, CALL);
  return {
    probe: await c.probe(w, "/health", CALL),
    healthGenerate: await c.healthGenerate(w, CALL),
    models: await c.models(w, CALL),
    kvCapacity: await c.kvCapacity(w, CALL),
    load: load && { ...load, details: JSON.parse(JSON.stringify(load.details)) },
    serverInfo: JSON.parse((await c.serverInfo(w, CALL)).text),
    modelInfo: JSON.parse((await c.modelInfo(w, CALL)).text),
    flushCache: await c.flushCache(w, CALL),
  };
}

Deno.test("grpc control: a worker in the same state answers as over HTTP", async () => {
  assert.deepEqual(
    await everything(fake().control, W.url),
    await everything(httpWorkerControl(httpWorker), "http://10.0.0.1:8000"),
  );
});
