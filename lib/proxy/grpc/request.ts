/**
 * An OpenAI (or sglang `/generate`) request as a gRPC worker takes it: the prompt as token ids
 * (chat: the model's chat template, then ids; completions and `/generate`: the text, or the ids
 * given), and sampling parameters with sglang's semantic defaults rather than proto3 zeros
 * (temperature 1, top_p 1, top_k -1, min_p 0, repetition_penalty 1, ...), including the extra
 * fields sglang accepts in OpenAI bodies (`top_k`, `min_p`, `repetition_penalty`,
 * `stop_token_ids`, `min_tokens`, `ignore_eos`, `no_stop_trim`, `regex`, `ebnf`, ...).
 * Bad input is a 400 naming the field; a prompt longer than the model's context a 400 too.
 */

import { invalidRequest } from "../../core/errors.ts";
import type { Endpoint } from "../../core/types.ts";
import type { SamplingParamsPb } from "../../grpc/sglang_proto.ts";
import { promptOfAsync, type PromptTokenizer, tokenIds } from "../../tokenizer/prompt.ts";

export type { PromptTokenizer } from "../../tokenizer/prompt.ts";

type Obj = Record<string, unknown>;

/** A request ready for `Generate`, and how its answer is shaped. */
export interface GrpcInput {
  /** Prompt token ids. */
  ids: number[];
  /** The prompt text, when there was one. */
  text: string;
  /** Sampling parameters, every field set. */
  sampling: SamplingParamsPb;
  /** Stop strings the gateway matches in the decoded text. */
  stops: string[];
  /** `no_stop_trim`: the stop string stays in the output. */
  noStopTrim: boolean;
  /** Ids that end the answer and are trimmed from it: EOS and `stop_token_ids`. */
  stopIds: ReadonlySet<number>;
  /** Skip special tokens when decoding. */
  skipSpecial: boolean;
  /** Which API answers. */
  endpoint: Endpoint;
  /** Model name answered. */
  model: string;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Whether the client streams. */
  stream: boolean;
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function num(o: Obj, key: string, fallback: number, param = key): number {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw invalidRequest(`${param} must be a number`, param);
  }
  return v;
}

const MAX_INT = 2 ** 31 - 1;

function int(o: Obj, key: string, param = key): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_INT) {
    throw invalidRequest(`${param} must be an integer from 0 to ${MAX_INT}`, param);
  }
  return v as number;
}

/** An integer field that may be negative (`top_k` -1 means off). */
function integer(o: Obj, key: string, fallback: number): number {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (!Number.isInteger(v) || Math.abs(v as number) > MAX_INT) {
    throw invalidRequest(`${key} must be an integer`, key);
  }
  return v as number;
}

function bool(o: Obj, key: string, fallback: boolean): boolean {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") throw invalidRequest(`${key} must be a boolean`, key);
  return v;
}

function stops(v: unknown, param: string): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === "string") return [v];
  if (Array.isArray(v) && v.every((s) => typeof s === "string")) return v as string[];
  throw invalidRequest(`${param} must be a string or a list of strings`, param);
}

/** Sampling parameters from `o` (OpenAI names, or sglang's under `/generate`). */
export function samplingParams(o: Obj, maxTokens: number | undefined): SamplingParamsPb {
  const s: SamplingParamsPb = {
    temperature: num(o, "temperature", 1),
    top_p: num(o, "top_p", 1),
    top_k: integer(o, "top_k", -1),
    min_p: num(o, "min_p", 0),
    frequency_penalty: num(o, "frequency_penalty", 0),
    presence_penalty: num(o, "presence_penalty", 0),
    repetition_penalty: num(o, "repetition_penalty", 1),
    stop: stops(o.stop, "stop"),
    stop_token_ids: tokenIds(o.stop_token_ids, "stop_token_ids"),
    skip_special_tokens: bool(o, "skip_special_tokens", true),
    spaces_between_special_tokens: bool(o, "spaces_between_special_tokens", true),
    n: 1,
    min_new_tokens: int(o, "min_tokens") ?? int(o, "min_new_tokens") ?? 0,
    ignore_eos: bool(o, "ignore_eos", false),
    no_stop_trim: bool(o, "no_stop_trim", false),
    logit_bias: {},
  };
  if (maxTokens !== undefined) s.max_new_tokens = maxTokens;
  const n = int(o, "n");
  if (n !== undefined && n !== 1) throw invalidRequest("only n = 1 is served to gRPC workers", "n");
  // One constraint at most (a oneof on the wire).
  const constraints: ["regex" | "ebnf_grammar" | "json_schema", string, string][] = [];
  if (typeof o.regex === "string") constraints.push(["regex", o.regex, "regex"]);
  if (typeof o.ebnf === "string") constraints.push(["ebnf_grammar", o.ebnf, "ebnf"]);
  if (o.json_schema !== undefined && o.json_schema !== null) {
    const js = o.json_schema; // sglang's native API takes a string
    constraints.push([
      "json_schema",
      typeof js === "string" ? js : JSON.stringify(js),
      "json_schema",
    ]);
  }
  const rf = o.response_format;
  if (isObj(rf) && rf.type === "json_schema" && isObj(rf.json_schema)) {
    constraints.push([
      "json_schema",
      JSON.stringify(rf.json_schema.schema ?? {}),
      "response_format",
    ]);
  } else if (isObj(rf) && rf.type === "json_object") {
    constraints.push(["json_schema", '{"type":"object"}', "response_format"]);
  }
  if (constraints.length > 1) {
    throw invalidRequest(
      "at most one of regex, ebnf, json_schema and response_format may constrain the output",
      constraints[1][2],
    );
  }
  if (constraints.length === 1) s[constraints[0][0]] = constraints[0][1];
  if (isObj(o.logit_bias)) {
    for (const [k, v] of Object.entries(o.logit_bias)) {
      if (typeof v === "number") s.logit_bias[k] = v;
    }
  }
  return s;
}

/** Prepares `body` (validated by route extraction) for a gRPC worker. */
export async function grpcInput(
  endpoint: Endpoint,
  body: Obj,
  tok: PromptTokenizer,
  fallbackModel: string,
): Promise<GrpcInput> {
  const { ids: promptIds, text } = await promptOfAsync(endpoint, body, tok);
  let sampling: SamplingParamsPb;
  if (endpoint === "chat") {
    sampling = samplingParams(body, int(body, "max_completion_tokens") ?? int(body, "max_tokens"));
  } else if (endpoint === "completions") {
    sampling = samplingParams(body, int(body, "max_tokens"));
  } else {
    const sp = isObj(body.sampling_params) ? body.sampling_params : {};
    sampling = samplingParams(sp, int(sp, "max_new_tokens", "sampling_params.max_new_tokens"));
  }
  const max = tok.maxLength;
  if (max !== null && promptIds.length + (sampling.max_new_tokens ?? 0) > max) {
    throw invalidRequest(
      `the prompt (${promptIds.length} tokens) and max tokens (${
        sampling.max_new_tokens ?? 0
      }) exceed the model's context of ${max} tokens`,
      endpoint === "chat" ? "messages" : "prompt",
    );
  }
  const so = body.stream_options;
  return {
    ids: promptIds,
    text,
    sampling,
    stops: sampling.stop,
    noStopTrim: sampling.no_stop_trim,
    stopIds: new Set([...tok.eosTokenIds, ...sampling.stop_token_ids]),
    skipSpecial: sampling.skip_special_tokens,
    endpoint,
    model: typeof body.model === "string" ? body.model : fallbackModel,
    includeUsage: isObj(so) && so.include_usage === true,
    stream: body.stream === true,
  };
}
