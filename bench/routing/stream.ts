/**
 * One streaming chat completion as a client sees it: POST `/v1/chat/completions` with
 * `stream: true` and `stream_options.include_usage`, read the SSE chunks, and report the time to
 * the first content delta, the end-to-end time, the reply text and the usage chunk. A request
 * counts as ok only with status 200, a stream that ends with `data: [DONE]` and no error event.
 */

import type { ChatMessage } from "./workload.ts";

/** What one request produced. */
export interface StreamResult {
  /** Status 200, `[DONE]` seen, no error event. */
  ok: boolean;
  /** HTTP status, or 0 when no response arrived. */
  status: number;
  /** Why it failed (status and body, network error, abort), or null. */
  error: string | null;
  /** ms from sending to the first non-empty content delta, or null. */
  ttftMs: number | null;
  /** ms from sending to the end of the stream. */
  e2eMs: number;
  /** The assistant reply, concatenated from the deltas. */
  text: string;
  /** From the usage chunk, or null without one. */
  usage: { promptTokens: number; completionTokens: number; cachedTokens: number } | null;
}

/** What one request sends. */
export interface ChatRequest {
  /** Base URL of the target, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** Model name (`sim-model`). */
  model: string;
  /** The conversation so far, ending with the user's message. */
  messages: ChatMessage[];
  /** `max_tokens`. */
  maxTokens: number;
  /** Extra headers (routing key, session id). */
  headers: Record<string, string>;
  /** Aborts the request (drain timeout, shutdown). */
  signal: AbortSignal;
  /** The HTTP client whose connections to use (default: `fetch`'s shared pool). */
  client?: Deno.HttpClient;
}

interface Chunk {
  choices?: { delta?: { content?: string | null } }[];
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: unknown;
}

/** Sends one streaming chat request and reads it to the end; never throws. */
export async function streamChat(r: ChatRequest): Promise<StreamResult> {
  const t0 = performance.now();
  const result: StreamResult = {
    ok: false,
    status: 0,
    error: null,
    ttftMs: null,
    e2eMs: 0,
    text: "",
    usage: null,
  };
  try {
    const res = await fetch(`${r.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...r.headers },
      body: JSON.stringify({
        model: r.model,
        messages: r.messages,
        max_tokens: r.maxTokens,
        stream: true,
        stream_options: { include_usage: true },
      }),
      signal: r.signal,
      ...(r.client ? { client: r.client } : {}),
    });
    result.status = res.status;
    if (res.status !== 200 || !res.body) {
      result.error = `${res.status} ${(await res.text()).slice(0, 200)}`;
      return result;
    }
    let buffer = "";
    let done = false;
    const parts: string[] = [];
    for await (const piece of res.body.pipeThrough(new TextDecoderStream())) {
      buffer += piece;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") {
            done = true;
            continue;
          }
          const chunk = JSON.parse(data) as Chunk;
          if (chunk.error) {
            result.error = `error event: ${JSON.stringify(chunk.error).slice(0, 200)}`;
            continue;
          }
          const content = chunk.choices?.[0]?.delta?.content;
          if (content) {
            result.ttftMs ??= performance.now() - t0;
            parts.push(content);
          }
          if (chunk.usage) {
            result.usage = {
              promptTokens: chunk.usage.prompt_tokens,
              completionTokens: chunk.usage.completion_tokens,
              cachedTokens: chunk.usage.prompt_tokens_details?.cached_tokens ?? 0,
            };
          }
        }
      }
    }
    result.text = parts.join("");
    if (!done && !result.error) result.error = "stream ended without [DONE]";
    result.ok = done && !result.error;
  } catch (e) {
    result.error = r.signal.aborted ? "aborted (drain timeout)" : String(e).slice(0, 200);
  } finally {
    result.e2eMs = performance.now() - t0;
  }
  return result;
}
