/**
 * A gRPC worker's generation as the client's API answers it: OpenAI chat completions and text
 * completions (a JSON body, or SSE chunks: the first chat chunk carries the role, the last the
 * finish reason, then a usage chunk when `stream_options.include_usage`, then `[DONE]`), and
 * sglang's `/generate` (`text`, `output_ids`, `meta_info`; streamed events carry the text so far).
 * `usage.prompt_tokens_details.cached_tokens` is what the worker reported cached.
 */

import type { Endpoint } from "../../core/types.ts";

/** Token counts of a generation. */
export interface Usage {
  prompt: number;
  completion: number;
  cached: number;
}

/** What every frame of one response shares. */
export interface Shape {
  endpoint: Endpoint;
  id: string;
  model: string;
  created: number;
}

const encoder = new TextEncoder();

function usageJson(u: Usage) {
  return {
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion,
    prompt_tokens_details: { cached_tokens: u.cached },
  };
}

function metaInfo(s: Shape, u: Usage, finish: string | null, matched: string | number | null) {
  return {
    id: s.id,
    finish_reason: finish === null
      ? null
      : { type: finish, ...(matched !== null ? { matched } : {}) },
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    cached_tokens: u.cached,
  };
}

/** The JSON body of a whole (non-streamed) answer. */
export function completeJson(
  s: Shape,
  text: string,
  outputIds: readonly number[],
  finish: string,
  matched: string | number | null,
  u: Usage,
): unknown {
  if (s.endpoint === "generate") {
    return { text, output_ids: outputIds, meta_info: metaInfo(s, u, finish, matched) };
  }
  const base = { id: s.id, created: s.created, model: s.model };
  if (s.endpoint === "chat") {
    return {
      ...base,
      object: "chat.completion",
      choices: [{
        index: 0,
        message: { role: "assistant", content: text },
        logprobs: null,
        finish_reason: finish,
        matched_stop: matched,
      }],
      usage: usageJson(u),
    };
  }
  return {
    ...base,
    object: "text_completion",
    choices: [{ index: 0, text, logprobs: null, finish_reason: finish, matched_stop: matched }],
    usage: usageJson(u),
  };
}

function sse(v: unknown): string {
  return `data: ${JSON.stringify(v)}\n\n`;
}

/** Builds the SSE frames of one streamed answer. */
export class SseShaper {
  readonly #s: Shape;
  #first = true;
  #text = "";
  #ids: number[] = [];

  constructor(s: Shape) {
    this.#s = s;
  }

  /** A frame carrying `delta` (and, for `/generate`, the ids so far); may be empty. */
  delta(delta: string, newIds: readonly number[], u: Usage): Uint8Array | null {
    const s = this.#s;
    for (const id of newIds) this.#ids.push(id);
    this.#text += delta;
    if (s.endpoint === "generate") {
      if (delta === "" && newIds.length === 0) return null;
      return encoder.encode(
        sse({ text: this.#text, output_ids: this.#ids, meta_info: metaInfo(s, u, null, null) }),
      );
    }
    if (delta === "" && !(this.#first && s.endpoint === "chat")) return null;
    return encoder.encode(sse(this.#chunk(delta, null, null)));
  }

  /** The closing frames: the finish reason, usage when asked, `[DONE]`. */
  end(
    finish: string,
    matched: string | number | null,
    u: Usage,
    includeUsage: boolean,
  ): Uint8Array {
    const s = this.#s;
    let out: string;
    if (s.endpoint === "generate") {
      out = sse({
        text: this.#text,
        output_ids: this.#ids,
        meta_info: metaInfo(s, u, finish, matched),
      });
    } else {
      out = sse(this.#chunk("", finish, matched));
      if (includeUsage) {
        const object = s.endpoint === "chat" ? "chat.completion.chunk" : "text_completion";
        out += sse({
          id: s.id,
          object,
          created: s.created,
          model: s.model,
          choices: [],
          usage: usageJson(u),
        });
      }
    }
    return encoder.encode(`${out}data: [DONE]\n\n`);
  }

  #chunk(delta: string, finish: string | null, matched: string | number | null) {
    const s = this.#s;
    const base = { id: s.id, created: s.created, model: s.model };
    if (s.endpoint === "chat") {
      const d: Record<string, string> = this.#first
        ? { role: "assistant", content: delta }
        : { content: delta };
      this.#first = false;
      return {
        ...base,
        object: "chat.completion.chunk",
        choices: [{
          index: 0,
          delta: finish === null ? d : {},
          logprobs: null,
          finish_reason: finish,
          ...(finish !== null ? { matched_stop: matched } : {}),
        }],
      };
    }
    return {
      ...base,
      object: "text_completion",
      choices: [{ index: 0, text: delta, logprobs: null, finish_reason: finish }],
    };
  }
}
