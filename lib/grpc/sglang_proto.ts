/**
 * sglang's scheduler service on the wire: the embedded `proto/sglang_scheduler.proto` and
 * `proto/sglang_common.proto` (text imports, which `deno bundle` inlines) parsed once by
 * protobufjs with the well-known `Struct` and `Timestamp` types, the method paths read from the
 * service, and the messages as plain objects with the proto's snake_case names. The TypeScript
 * interfaces below mirror the proto's fields the gateway uses; decoding fills absent scalars with
 * proto3 zeros.
 */

import { Buffer } from "node:buffer";
import protobuf from "protobufjs";
import commonText from "../../proto/sglang_common.proto" with { type: "text" };
import schedulerText from "../../proto/sglang_scheduler.proto" with { type: "text" };

const root = new protobuf.Root();
const wellKnown =
  (protobuf as unknown as { common: Record<string, { nested: protobuf.INamespace["nested"] }> })
    .common;
for (const f of ["google/protobuf/struct.proto", "google/protobuf/timestamp.proto"]) {
  root.addJSON(wellKnown[f].nested!);
}
protobuf.parse(commonText, root, { keepCase: true });
protobuf.parse(schedulerText, root, { keepCase: true });
root.resolveAll();

const PKG = "sglang.grpc.scheduler";
const service = root.lookupService(`${PKG}.SglangScheduler`);

/** One method: its path and its message types. */
export interface MethodSpec {
  path: string;
  request: protobuf.Type;
  response: protobuf.Type;
  serverStream: boolean;
}

function spec(name: string): MethodSpec {
  const m = service.methods[name];
  if (!m) throw new Error(`sglang_scheduler.proto has no method ${name}`);
  m.resolve();
  return {
    path: `/${service.fullName.slice(1)}/${name}`,
    request: m.resolvedRequestType!,
    response: m.resolvedResponseType!,
    serverStream: !!m.responseStream,
  };
}

/** The methods the gateway calls (and the simulated worker serves). */
export const METHODS = {
  generate: spec("Generate"),
  healthCheck: spec("HealthCheck"),
  abort: spec("Abort"),
  getModelInfo: spec("GetModelInfo"),
  getServerInfo: spec("GetServerInfo"),
  getLoads: spec("GetLoads"),
  flushCache: spec("FlushCache"),
  subscribeKvEvents: spec("SubscribeKvEvents"),
} as const;

const TO_OBJECT: protobuf.IConversionOptions = {
  longs: Number,
  defaults: true,
  oneofs: true,
  arrays: true,
};

/** Encodes a plain object as `type`; throws on a field of the wrong kind. */
export function encode(type: protobuf.Type, value: object): Buffer {
  const err = type.verify(value);
  if (err) throw new Error(`${type.name}: ${err}`);
  const bytes = type.encode(type.fromObject(value)).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** Decodes bytes of `type` into a plain object (absent scalars as proto3 zeros). */
export function decode<T>(type: protobuf.Type, bytes: Uint8Array): T {
  return type.toObject(type.decode(bytes), TO_OBJECT) as T;
}

/** A `google.protobuf.Struct` as JSON. */
export function structToJson(s: unknown): Record<string, unknown> {
  const fields = (s as { fields?: Record<string, unknown> } | null)?.fields ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) out[k] = valueToJson(v);
  return out;
}

function valueToJson(v: unknown): unknown {
  // The well-known types keep protobufjs's camelCase names.
  const x = v as Record<string, unknown>;
  if (!x || typeof x !== "object") return null;
  if ("structValue" in x) return structToJson(x.structValue);
  if ("listValue" in x) {
    return ((x.listValue as { values?: unknown[] }).values ?? []).map(valueToJson);
  }
  for (const k of ["numberValue", "stringValue", "boolValue"]) if (k in x) return x[k];
  return null;
}

/** JSON as a `google.protobuf.Struct`. */
export function jsonToStruct(o: Record<string, unknown>): unknown {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) fields[k] = jsonToValue(v);
  return { fields };
}

function jsonToValue(v: unknown): unknown {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(jsonToValue) } };
  return { structValue: jsonToStruct(v as Record<string, unknown>) };
}

/** `SamplingParams`. */
export interface SamplingParamsPb {
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  frequency_penalty: number;
  presence_penalty: number;
  repetition_penalty: number;
  max_new_tokens?: number;
  stop: string[];
  stop_token_ids: number[];
  skip_special_tokens: boolean;
  spaces_between_special_tokens: boolean;
  regex?: string;
  json_schema?: string;
  ebnf_grammar?: string;
  structural_tag?: string;
  n: number;
  min_new_tokens: number;
  ignore_eos: boolean;
  no_stop_trim: boolean;
  stream_interval?: number;
  logit_bias: Record<string, number>;
}

/** `DisaggregatedParams`. */
export interface DisaggregatedParamsPb {
  bootstrap_host: string;
  bootstrap_port: number;
  bootstrap_room: number;
}

/** `GenerateRequest`. */
export interface GenerateRequestPb {
  request_id: string;
  tokenized: { original_text: string; input_ids: number[] };
  sampling_params: SamplingParamsPb;
  return_logprob: boolean;
  logprob_start_len: number;
  top_logprobs_num: number;
  disaggregated_params?: DisaggregatedParamsPb;
  lora_id: string;
  data_parallel_rank: number;
  stream: boolean;
  require_reasoning: boolean;
}

/** `GenerateStreamChunk`. */
export interface GenerateChunkPb {
  token_ids: number[];
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  index: number;
}

/** `GenerateComplete`. */
export interface GenerateCompletePb {
  output_ids: number[];
  finish_reason: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  matched_token_id?: number;
  matched_stop_str?: string;
  /** Which of the two is set, when one is (`oneofs`). */
  matched_stop?: "matched_token_id" | "matched_stop_str";
  index: number;
}

/** `GenerateResponse`. */
export interface GenerateResponsePb {
  request_id: string;
  chunk?: GenerateChunkPb;
  complete?: GenerateCompletePb;
  response?: "chunk" | "complete";
}

/** `HealthCheckResponse`. */
export interface HealthCheckResponsePb {
  healthy: boolean;
  message: string;
}

/** `GetModelInfoResponse`. */
export interface ModelInfoPb {
  model_path: string;
  tokenizer_path: string;
  is_generation: boolean;
  served_model_name: string;
  max_context_length: number;
  vocab_size: number;
  model_type: string;
  eos_token_ids: number[];
  pad_token_id: number;
  bos_token_id: number;
  max_req_input_len: number;
  architectures: string[];
  default_sampling_params_json: string;
}

/** `GetServerInfoResponse` (Structs as JSON). */
export interface ServerInfoPb {
  server_args: unknown;
  scheduler_info: unknown;
  active_requests: number;
  is_paused: boolean;
  uptime_seconds: number;
  sglang_version: string;
  server_type: string;
  max_total_num_tokens: number;
}

/** `SchedulerLoad`. */
export interface SchedulerLoadPb {
  dp_rank: number;
  num_running_reqs: number;
  num_waiting_reqs: number;
  num_total_reqs: number;
  num_used_tokens: number;
  max_total_num_tokens: number;
  token_usage: number;
  gen_throughput: number;
  cache_hit_rate: number;
  utilization: number;
  max_running_requests: number;
  num_waiting_uncached_tokens: number;
}

/** `GetLoadsResponse`. */
export interface LoadsPb {
  timestamp: string;
  version: string;
  dp_rank_count: number;
  loads: SchedulerLoadPb[];
}

/** `FlushCacheResponse`, `AbortResponse`. */
export interface AckPb {
  success: boolean;
  message: string;
}

/** `KvBlock`: one block an engine stored (`block_hash` as a decimal string). */
export interface KvBlockPb {
  block_hash: string;
  token_ids: number[];
  block_size: number;
  lora_id?: string;
}

/** `KvCacheEvent`: blocks stored, blocks removed, or the cache cleared. */
export interface KvCacheEventPb {
  event_id?: number | string;
  data?: "stored" | "removed" | "cleared";
  stored?: { blocks: KvBlockPb[]; parent_block_hash?: string };
  removed?: { block_hashes: string[] };
  cleared?: Record<string, never>;
}

/** `KvEventBatch`: one numbered batch of one data-parallel rank. */
export interface KvEventBatchPb {
  sequence_number: number;
  timestamp: number;
  events: KvCacheEventPb[];
  dp_rank?: number;
}
