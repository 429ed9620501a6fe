/**
 * Response shapes of the engines the simulator imitates: OpenAI chat and text completions
 * (whole and as SSE chunks, with `usage.prompt_tokens_details.cached_tokens` and the trailing
 * usage chunk of `stream_options.include_usage`), and sglang's `/generate` (`text` plus
 * `meta_info`, cumulative text when streamed).
 */

import type { GenerateResult } from "./types.ts";

/** Which API a request came in on. */
export type Api = "chat" | "completions" | "generate";

/** What every response of one request shares. */
export interface ResponseContext {
  /** Response id. */
  id: string;
  /** Model name echoed back. */
  model: string;
  /** Unix seconds. */
  created: number;
  /** Whether to send a usage chunk at the end of a stream. */
  includeUsage: boolean;
}

const enc = new TextEncoder();

/** OpenAI usage with the cached-token detail. */
export function usage(r: GenerateResult) {
  return {
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: r.promptTokens + r.completionTokens,
    prompt_tokens_details: { cached_tokens: r.cachedTokens },
  };
}

function meta(c: ResponseContext, r: GenerateResult | null, completion: number) {
  return {
    id: c.id,
    prompt_tokens: r?.promptTokens,
    completion_tokens: completion,
    cached_tokens: r?.cachedTokens,
    finish_reason: r ? { type: r.finishReason, length: r.completionTokens } : null,
  };
}

/** The whole (non-streamed) response body. */
export function completeBody(
  api: Api,
  c: ResponseContext,
  text: string,
  r: GenerateResult,
): unknown {
  if (api === "generate") return { text, meta_info: meta(c, r, r.completionTokens) };
  const finish = r.finishReason === "abort" ? "abort" : "length";
  if (api === "chat") {
    return {
      id: c.id,
      object: "chat.completion",
      created: c.created,
      model: c.model,
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: finish }],
      usage: usage(r),
    };
  }
  return {
    id: c.id,
    object: "text_completion",
    created: c.created,
    model: c.model,
    choices: [{ index: 0, text, finish_reason: finish, logprobs: null }],
    usage: usage(r),
  };
}

function frame(obj: unknown): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(obj)}\n\n`);
}

/** The SSE frame for one generated piece (`soFar` is the text including it, for /generate). */
export function tokenFrame(
  api: Api,
  c: ResponseContext,
  piece: string,
  soFar: string,
  n: number,
): Uint8Array {
  if (api === "generate") return frame({ text: soFar, meta_info: meta(c, null, n) });
  if (api === "chat") {
    return frame({
      id: c.id,
      object: "chat.completion.chunk",
      created: c.created,
      model: c.model,
      choices: [{
        index: 0,
        delta: n === 1 ? { role: "assistant", content: piece } : { content: piece },
        finish_reason: null,
      }],
    });
  }
  return frame({
    id: c.id,
    object: "text_completion",
    created: c.created,
    model: c.model,
    choices: [{ index: 0, text: piece, finish_reason: null }],
  });
}

/** The closing SSE frames: finish reason, the usage chunk when asked, `[DONE]`. */
export function endFrames(
  api: Api,
  c: ResponseContext,
  soFar: string,
  r: GenerateResult,
): Uint8Array[] {
  const done = enc.encode("data: [DONE]\n\n");
  if (api === "generate") {
    return [frame({ text: soFar, meta_info: meta(c, r, r.completionTokens) }), done];
  }
  const object = api === "chat" ? "chat.completion.chunk" : "text_completion";
  const choice = api === "chat"
    ? { index: 0, delta: {}, finish_reason: r.finishReason }
    : { index: 0, text: "", finish_reason: r.finishReason };
  const out = [frame({ id: c.id, object, created: c.created, model: c.model, choices: [choice] })];
  if (c.includeUsage) {
    out.push(
      frame({ id: c.id, object, created: c.created, model: c.model, choices: [], usage: usage(r) }),
    );
  }
  out.push(done);
  return out;
}

/** An OpenAI-style error body. */
export function errorBody(message: string, type: string, code: number): unknown {
  return { error: { message, type, code, param: null } };
}
