/**
 * What the faulty worker (`faulty_worker.ts`) writes: whole HTTP/1.1 responses with a sized
 * body, the OpenAI JSON of a small completion, the SSE events of a stream (chat or completions,
 * optionally padded, a usage event when asked, `[DONE]`), and random bytes.
 */

import { Buffer } from "node:buffer";

const MODEL = "sim-model";

/** A stream's shape. */
export interface Shape {
  /** `/v1/chat/completions` (else `/v1/completions`). */
  chat: boolean;
  /** Send a usage event before `[DONE]` (`stream_options.include_usage`). */
  usage: boolean;
  /** Token events. */
  tokens: number;
  /** ms before each token event (0: all at once). */
  tokenMs: number;
  /** Padding bytes in each token event's text. */
  pad: number;
}

const REASONS: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  404: "Not Found",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/** A whole response: status, content type, sized body, keep-alive. */
export function jsonResponse(status: number, body: string, type = "application/json"): Buffer {
  const b = Buffer.from(body);
  return Buffer.concat([
    Buffer.from(
      `HTTP/1.1 ${status} ${REASONS[status] ?? "Status"}\r\ncontent-type: ${type}\r\n` +
        `content-length: ${b.length}\r\n\r\n`,
    ),
    b,
  ]);
}

let seq = 0;

/** The JSON of a small whole completion. */
export function plainBody(chat: boolean): string {
  const id = `cmpl-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
  return JSON.stringify(
    chat
      ? {
        id,
        object: "chat.completion",
        created,
        model: MODEL,
        choices: [{
          index: 0,
          message: { role: "assistant", content: "ok" },
          finish_reason: "stop",
        }],
        usage,
      }
      : {
        id,
        object: "text_completion",
        created,
        model: MODEL,
        choices: [{ index: 0, text: "ok", finish_reason: "stop", logprobs: null }],
        usage,
      },
  );
}

/** The `data:` events of a stream of `shape`, `[DONE]` last (each with its blank line). */
export function* sseEvents(shape: Shape): Generator<string> {
  const id = `cmpl-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  const object = shape.chat ? "chat.completion.chunk" : "text_completion";
  const pad = "x".repeat(shape.pad);
  for (let i = 0; i < shape.tokens; i++) {
    const text = `t${i} ${pad}`;
    const finish = i === shape.tokens - 1 ? "length" : null;
    const choice = shape.chat
      ? { index: 0, delta: { content: text }, finish_reason: finish }
      : { index: 0, text, finish_reason: finish };
    yield `data: ${JSON.stringify({ id, object, created, model: MODEL, choices: [choice] })}\n\n`;
  }
  if (shape.usage) {
    const usage = {
      prompt_tokens: 1,
      completion_tokens: shape.tokens,
      total_tokens: 1 + shape.tokens,
    };
    yield `data: ${JSON.stringify({ id, object, created, model: MODEL, choices: [], usage })}\n\n`;
  }
  yield "data: [DONE]\n\n";
}

/** `n` random bytes (from `random`), never a CR or LF, so they never end a head. */
export function garbageBytes(random: () => number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    let b = Math.floor(random() * 256);
    if (b === 10 || b === 13) b = 0;
    out[i] = b;
  }
  return out;
}
