/**
 * Continuing a stream on another worker once its worker broke, went silent or ended it without
 * its terminator, after bytes had reached the client (as NVIDIA Dynamo migrates a request): the
 * gateway keeps what it relayed (`Transcript`, whole events only), reads the text so far back
 * from it when the stream breaks, and asks another worker to go on from there — a completion
 * with the prompt plus that text, a chat with an assistant message holding it and
 * `continue_final_message: true`, `add_generation_prompt: false` (vLLM's and sglang's fields) —
 * with its token budgets shrunk by the pieces already sent. The new worker's events are relayed
 * as the same stream (`Rewriter`): the first stream's id, created time and model, no second
 * `role`, and a usage chunk counting the original prompt and every generated piece.
 *
 * Which requests continue (`blockedBy` says why not): streamed chat and text completions with one
 * choice and no logprobs, tools, stop strings, constrained output, `echo` or `suffix`, a string
 * prompt (completions), and no `continue_final_message` of their own; sglang's `/generate` with
 * one `text` (its events carry the whole text so far and `meta_info.completion_tokens`, so the
 * rest is asked with the text plus it, `max_new_tokens` less it, and each event of the new worker
 * is prefixed with it). The others end with an error event as before: n > 1 and logprobs would
 * need per-choice and per-token state the text alone does not give; a tool call's arguments and
 * constrained output restart their parser or grammar on the new worker; whether an engine holds
 * back the start of a stop string before sending it differs by engine (and PD pairs and gRPC
 * workers are served by other paths). A chat or completion piece is counted as one token: engines
 * that send several tokens in one event may continue a few tokens past the budget.
 *
 * Happy-path cost: one copy of each relayed chunk into the transcript; the rest runs on a break.
 */

import type { Endpoint } from "../../core/types.ts";

/** The most a stream's transcript keeps; past it, the stream is not continued. */
export const TRANSCRIPT_MAX_BYTES = 4 * 1024 * 1024;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** What the client was sent of a stream, read back from its events. */
export interface SoFar {
  /** The stream's id, created time and model (from its first event; null before one). */
  id: string | null;
  created: number | null;
  model: string | null;
  /** The text of choice 0 so far. */
  text: string;
  /** Events that carried text (each counted as one generated token). */
  pieces: number;
  /** A finish reason or the usage chunk was sent: nothing is left to generate. */
  finished: boolean;
  /** Why it cannot be continued from what was sent (null: it can). */
  blocked: string | null;
}

/** Why a request cannot be continued, or null when it can (see the module comment). */
export function blockedBy(endpoint: Endpoint, body: unknown): string | null {
  if (endpoint !== "chat" && endpoint !== "completions" && endpoint !== "generate") {
    return `the ${endpoint} endpoint`;
  }
  if (typeof body !== "object" || body === null) return "a body that is not an object";
  const b = body as Record<string, unknown>;
  if (b.stream !== true) return "a whole answer";
  if (endpoint === "generate") return generateBlockedBy(b);
  if ((typeof b.n === "number" && b.n > 1) || (typeof b.best_of === "number" && b.best_of > 1)) {
    return "n > 1";
  }
  if (b.logprobs || b.top_logprobs) return "logprobs";
  if ((Array.isArray(b.tools) && b.tools.length > 0) || Array.isArray(b.functions)) return "tools";
  const stop = b.stop;
  if ((typeof stop === "string" && stop) || (Array.isArray(stop) && stop.length > 0)) {
    return "stop strings";
  }
  const format = b.response_format as { type?: unknown } | undefined;
  if (
    (format && format.type !== "text") || b.guided_json || b.guided_regex || b.guided_choice ||
    b.guided_grammar || b.regex || b.json_schema || b.ebnf || b.structural_tag
  ) return "constrained output";
  if (endpoint === "completions") {
    if (typeof b.prompt !== "string") return "a prompt that is not one string";
    if (b.echo || b.suffix) return "echo or suffix";
  } else {
    if (!Array.isArray(b.messages)) return "no messages";
    if (b.continue_final_message || b.add_generation_prompt === false) {
      return "a request that continues a message itself";
    }
  }
  return null;
}

/** Why a streamed sglang `/generate` request cannot be continued, or null. */
function generateBlockedBy(b: Record<string, unknown>): string | null {
  if (typeof b.text !== "string") return "a prompt that is not one text (input_ids, a batch)";
  if (b.return_logprob) return "logprobs";
  const sp = (b.sampling_params ?? {}) as Record<string, unknown>;
  if (typeof sp.n === "number" && sp.n > 1) return "n > 1";
  const stop = sp.stop;
  if ((typeof stop === "string" && stop) || (Array.isArray(stop) && stop.length > 0)) {
    return "stop strings";
  }
  if (sp.json_schema || sp.regex || sp.ebnf || sp.structural_tag) return "constrained output";
  return null;
}

/** The events of `text` (blank-line separated), each as its `data:` payload; others skipped. */
function dataOf(event: string): string | null {
  let data: string | null = null;
  for (const line of event.split(/\r?\n|\r/)) {
    if (!line.startsWith("data:")) continue;
    const v = line.slice(line[5] === " " ? 6 : 5);
    data = data === null ? v : data + "\n" + v;
  }
  return data;
}

/** Splits complete SSE events off the front of `text`; returns them and the rest. */
function splitEvents(text: string): { events: string[]; rest: string } {
  const events = text.split(/\r\n\r\n|\n\n|\r\r/);
  const rest = events.pop() ?? "";
  return { events, rest };
}

/**
 * Reads one sglang `/generate` event into `s`: its text is the whole text so far, its
 * `meta_info` the id, the tokens generated and the finish reason.
 */
function readGenerate(o: Record<string, unknown>, s: SoFar): void {
  if (Array.isArray(o) || typeof o.text !== "string") {
    s.blocked ??= "a /generate event without one text";
    return;
  }
  if (!o.text.startsWith(s.text)) s.blocked ??= "incremental /generate text";
  s.text = o.text;
  const meta = (o.meta_info ?? {}) as Record<string, unknown>;
  if (s.id === null && typeof meta.id === "string") s.id = meta.id;
  if (typeof meta.completion_tokens === "number") s.pieces = meta.completion_tokens;
  if (meta.finish_reason) s.finished = true;
}

/** Reads one parsed event of choice 0 into `s`. */
function readEvent(endpoint: Endpoint, o: Record<string, unknown>, s: SoFar): void {
  if (endpoint === "generate") return readGenerate(o, s);
  if (s.id === null && typeof o.id === "string") {
    s.id = o.id;
    s.created = typeof o.created === "number" ? o.created : null;
    s.model = typeof o.model === "string" ? o.model : null;
  }
  if (o.usage && Array.isArray(o.choices) && o.choices.length === 0) s.finished = true;
  if (!Array.isArray(o.choices)) return;
  for (const c of o.choices as Record<string, unknown>[]) {
    if (c.index !== undefined && c.index !== 0) s.blocked ??= "more than one choice";
    if (c.logprobs) s.blocked ??= "logprobs";
    if (c.finish_reason) s.finished = true;
    let piece: unknown;
    if (endpoint === "chat") {
      const delta = (c.delta ?? {}) as Record<string, unknown>;
      if (delta.tool_calls || delta.function_call) s.blocked ??= "tool calls";
      if (delta.reasoning_content) s.blocked ??= "reasoning content";
      piece = delta.content;
    } else piece = c.text;
    if (typeof piece === "string" && piece.length > 0) {
      s.text += piece;
      s.pieces++;
    }
  }
}

/** What a stream sent its client, kept to continue it (whole events only). */
export class Transcript {
  readonly #endpoint: Endpoint;
  /**
   * The bytes, in one buffer that doubles as it fills: one object per stream survives the young
   * generation's collections, not one per event.
   */
  #buf: Uint8Array | null = null;
  #bytes = 0;
  #overflow = false;

  constructor(endpoint: Endpoint) {
    this.#endpoint = endpoint;
  }

  /** Keeps `chunk`, sent to the client (whole events). */
  add(chunk: Uint8Array): void {
    if (this.#overflow) return;
    const n = this.#bytes + chunk.byteLength;
    if (n > TRANSCRIPT_MAX_BYTES) {
      this.#overflow = true;
      this.#buf = null;
      return;
    }
    let buf = this.#buf;
    if (buf === null || n > buf.byteLength) {
      const grown = new Uint8Array(Math.max(1024, n * 2));
      if (buf !== null) grown.set(buf.subarray(0, this.#bytes));
      this.#buf = buf = grown;
    }
    buf.set(chunk, this.#bytes);
    this.#bytes = n;
  }

  /** What was sent, read back. */
  read(): SoFar {
    const s: SoFar = {
      id: null,
      created: null,
      model: null,
      text: "",
      pieces: 0,
      finished: false,
      blocked: null,
    };
    if (this.#overflow) {
      s.blocked = `a stream over ${TRANSCRIPT_MAX_BYTES} bytes`;
      return s;
    }
    const text = this.#buf === null ? "" : decoder.decode(this.#buf.subarray(0, this.#bytes));
    for (const event of text.split(/\r\n\r\n|\n\n|\r\r/)) {
      const data = dataOf(event);
      if (data === null || data.trim() === "[DONE]") continue;
      try {
        readEvent(this.#endpoint, JSON.parse(data), s);
      } catch {
        s.blocked ??= "an event that is not JSON";
      }
    }
    return s;
  }
}

/** The request that goes on from `s`, or null when its token budget is spent. */
export function continuationBody(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  s: SoFar,
): Record<string, unknown> | null {
  const out: Record<string, unknown> = { ...body };
  if (endpoint === "generate") return generateBody(body, s);
  for (const key of ["max_tokens", "max_completion_tokens"]) {
    const v = out[key];
    if (typeof v !== "number") continue;
    if (v - s.pieces <= 0) return null;
    out[key] = v - s.pieces;
  }
  if (typeof out.min_tokens === "number") out.min_tokens = Math.max(0, out.min_tokens - s.pieces);
  if (s.text === "") return out;
  if (endpoint === "completions") out.prompt = (body.prompt as string) + s.text;
  else {
    out.messages = [...(body.messages as unknown[]), { role: "assistant", content: s.text }];
    out.continue_final_message = true;
    out.add_generation_prompt = false;
  }
  return out;
}

/** A `/generate` request for the rest: the text plus the text so far, budgets less it. */
function generateBody(
  body: Record<string, unknown>,
  s: SoFar,
): Record<string, unknown> | null {
  const sp: Record<string, unknown> = { ...(body.sampling_params as Record<string, unknown>) };
  if (typeof sp.max_new_tokens === "number") {
    if (sp.max_new_tokens - s.pieces <= 0) return null;
    sp.max_new_tokens -= s.pieces;
  }
  if (typeof sp.min_new_tokens === "number") {
    sp.min_new_tokens = Math.max(0, sp.min_new_tokens - s.pieces);
  }
  return { ...body, text: (body.text as string) + s.text, sampling_params: sp };
}

/** The frames that end a stream whose budget is spent: a `length` finish, then `[DONE]`. */
export function budgetSpent(endpoint: Endpoint, s: SoFar): Uint8Array {
  if (endpoint === "generate") {
    const finish = { type: "length", length: s.pieces };
    const meta = { id: s.id, completion_tokens: s.pieces, finish_reason: finish };
    return encoder.encode(
      `data: ${JSON.stringify({ text: s.text, meta_info: meta })}\n\ndata: [DONE]\n\n`,
    );
  }
  const choice = endpoint === "chat"
    ? { index: 0, delta: {}, finish_reason: "length" }
    : { index: 0, text: "", finish_reason: "length" };
  const event = {
    id: s.id,
    object: endpoint === "chat" ? "chat.completion.chunk" : "text_completion",
    created: s.created,
    model: s.model,
    choices: [choice],
  };
  return encoder.encode(`data: ${JSON.stringify(event)}\n\ndata: [DONE]\n\n`);
}

/** A continuing worker's `/generate` event as the first stream's: all the text, every token. */
function generateEvent(o: Record<string, unknown>, s: SoFar): Record<string, unknown> {
  if (typeof o.text === "string") o.text = s.text + o.text;
  const meta = o.meta_info as Record<string, unknown> | undefined;
  if (!meta) return o;
  if (s.id !== null) meta.id = s.id;
  if (typeof meta.prompt_tokens === "number") {
    meta.prompt_tokens = Math.max(0, meta.prompt_tokens - s.pieces);
  }
  if (typeof meta.completion_tokens === "number") meta.completion_tokens += s.pieces;
  const finish = meta.finish_reason as Record<string, unknown> | null | undefined;
  if (finish && typeof finish.length === "number") finish.length += s.pieces;
  return o;
}

/**
 * Rewrites a continuing worker's events into the first stream's: its id, created time and model;
 * no `role` in a delta (an event left with nothing is dropped); usage counting the original
 * prompt (the continuation's less the `pieces` sent before it) and every generated piece.
 */
export class Rewriter {
  readonly #s: SoFar;
  readonly #generate: boolean;
  #rest = "";

  constructor(s: SoFar, endpoint: Endpoint) {
    this.#s = s;
    this.#generate = endpoint === "generate";
  }

  /** The whole events of `chunk` (with what was held before it), rewritten; the rest is held. */
  push(chunk: Uint8Array): Uint8Array {
    const { events, rest } = splitEvents(this.#rest + decoder.decode(chunk, { stream: true }));
    this.#rest = rest;
    let out = "";
    for (const e of events) {
      const r = this.#event(e);
      if (r !== null) out += r + "\n\n";
    }
    return encoder.encode(out);
  }

  #event(event: string): string | null {
    const data = dataOf(event);
    if (data === null || data.trim() === "[DONE]") return event;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(data);
    } catch {
      return event;
    }
    const s = this.#s;
    if (this.#generate) return `data: ${JSON.stringify(generateEvent(o, s))}`;
    if (s.id !== null) o.id = s.id;
    if (s.created !== null) o.created = s.created;
    if (s.model !== null) o.model = s.model;
    if (Array.isArray(o.choices)) {
      for (const c of o.choices as Record<string, unknown>[]) {
        const delta = c.delta as Record<string, unknown> | undefined;
        if (!delta || !("role" in delta)) continue;
        delete delta.role;
        if (Object.keys(delta).length === 0 && !c.finish_reason && o.choices.length === 1) {
          return null; // a role announcement and nothing else: already sent once
        }
      }
    }
    const u = o.usage as Record<string, number> | undefined;
    if (u && typeof u.prompt_tokens === "number" && typeof u.completion_tokens === "number") {
      u.prompt_tokens = Math.max(0, u.prompt_tokens - s.pieces);
      u.completion_tokens += s.pieces;
      u.total_tokens = u.prompt_tokens + u.completion_tokens;
    }
    return `data: ${JSON.stringify(o)}`;
  }
}
