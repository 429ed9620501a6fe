/**
 * Extracts a `RouteRequest` from a parsed body and its headers, validating the fields the
 * gateway reads or that every client of the endpoint must send. Anything else in the body is
 * left alone and forwarded unchanged. Invalid input throws a 400 `GatewayError` naming the
 * field.
 *
 * Routing text per endpoint (SMG's): chat = every message's text in order joined by spaces;
 * completions = the prompt (an array joined by spaces); generate = `text`; embeddings = `input`;
 * rerank = `query`. Token ids come from a valid `x-smg-routing-tokens` header, else `/generate`'s
 * `input_ids` or a completions prompt of token ids (first sequence of a batch). The request's
 * characters per token are its model's estimate (`ExtractOptions.charsPerToken`).
 */

import { invalidRequest } from "../core/errors.ts";
import type { HeaderMap } from "../core/http.ts";
import { DEFAULT_CHARS_PER_TOKEN } from "../core/chars_per_token.ts";
import type { Endpoint, RouteRequest } from "../core/types.ts";

type Obj = Record<string, unknown>;

/** Options for extraction. */
export interface ExtractOptions {
  /** Lower-case header names a routing key is read from, first valid wins. */
  routingKeyHeaders: readonly string[];
  /** `--routing-key-override`: derive session keys from `rid` and strip turn suffixes (default false). */
  routingKeyOverride?: boolean;
  /** Characters per token of a model's text (default `DEFAULT_CHARS_PER_TOKEN` for every model). */
  charsPerToken?: (model: string | null) => number;
}

const MAX_KEY_BYTES = 128;
const MAX_TOKEN_HEADER_BYTES = 4096;
const MAX_TOKEN_HEADER_IDS = 512;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function typeName(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

function isTokenList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0);
}

function isStringList(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === "string");
}

function optionalType(body: Obj, field: string, type: "string" | "boolean" | "object"): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  const ok = type === "object"
    ? isObj(v)
    : type === "string"
    ? typeof v === "string"
    : typeof v === "boolean";
  if (!ok) {
    throw invalidRequest(
      `'${field}' must be ${type === "object" ? "an" : "a"} ${type}, got ${typeName(v)}`,
      field,
    );
  }
}

function optionalInt(body: Obj, field: string, min: number): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (!Number.isInteger(v) || (v as number) < min) {
    throw invalidRequest(
      `'${field}' must be an integer >= ${min}, got ${JSON.stringify(v)}`,
      field,
    );
  }
}

/** The text parts of an OpenAI message `content` (string or array of parts). */
function contentText(content: unknown, path: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) {
    throw invalidRequest(
      `'${path}' must be a string or an array of parts, got ${typeName(content)}`,
      path,
    );
  }
  let out = "";
  for (const part of content) {
    if (!isObj(part)) throw invalidRequest(`'${path}' parts must be objects`, path);
    if (part.type === "text" && typeof part.text === "string") out += (out ? " " : "") + part.text;
  }
  return out;
}

function chatText(body: Obj): string {
  const messages = body.messages;
  if (!Array.isArray(messages)) {
    throw invalidRequest(
      messages === undefined
        ? "'messages' is required"
        : `'messages' must be an array, got ${typeName(messages)}`,
      "messages",
    );
  }
  if (messages.length === 0) throw invalidRequest("'messages' must not be empty", "messages");
  const parts: string[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isObj(m)) throw invalidRequest(`'messages[${i}]' must be an object`, `messages[${i}]`);
    if (typeof m.role !== "string" || m.role === "") {
      throw invalidRequest(
        `'messages[${i}].role' must be a non-empty string`,
        `messages[${i}].role`,
      );
    }
    const text = contentText(m.content, `messages[${i}].content`);
    if (text) parts.push(text);
    if (typeof m.reasoning_content === "string" && m.reasoning_content) {
      parts.push(m.reasoning_content);
    }
  }
  return parts.join(" ");
}

/** A completions prompt's token ids (the first sequence of a batch), or null for text. */
function promptTokenIds(p: unknown): number[] | null {
  if (isTokenList(p) && p.length > 0) return p;
  if (Array.isArray(p) && p.length > 0 && p.every(isTokenList) && p[0].length > 0) return p[0];
  return null;
}

function promptText(body: Obj): string {
  const p = body.prompt;
  if (p === undefined) throw invalidRequest("'prompt' is required", "prompt");
  if (typeof p === "string") return p;
  if (isStringList(p)) return p.join(" ");
  if (isTokenList(p)) return p.join(" ");
  if (Array.isArray(p) && p.every(isTokenList)) return (p[0] ?? []).join(" ");
  throw invalidRequest("'prompt' must be a string, an array of strings or of token ids", "prompt");
}

function generateInputs(body: Obj): { text: string; tokens: number[] | null } {
  const { text, input_ids: ids } = body;
  let tokens: number[] | null = null;
  if (ids !== undefined && ids !== null) {
    if (isTokenList(ids)) tokens = ids;
    else if (Array.isArray(ids) && ids.every(isTokenList)) tokens = ids[0] ?? null;
    else {throw invalidRequest(
        "'input_ids' must be an array of token ids or of such arrays",
        "input_ids",
      );}
    if (tokens && tokens.length === 0) tokens = null;
  }
  let t = "";
  if (text !== undefined && text !== null) {
    if (typeof text === "string") t = text;
    else if (isStringList(text)) t = text[0] ?? "";
    else throw invalidRequest("'text' must be a string or an array of strings", "text");
  } else if (ids === undefined || ids === null) {
    if (body.input_embeds === undefined) {
      throw invalidRequest("one of 'text' or 'input_ids' is required", "text");
    }
  }
  return { text: t || (tokens ? tokens.join(" ") : ""), tokens };
}

function embeddingText(body: Obj): string {
  const v = body.input;
  if (v === undefined) throw invalidRequest("'input' is required", "input");
  if (typeof v === "string") return v;
  if (isStringList(v)) return v.join(" ");
  if (isTokenList(v) || (Array.isArray(v) && v.every(isTokenList))) return "";
  throw invalidRequest("'input' must be a string, an array of strings or of token ids", "input");
}

function rerankText(body: Obj): string {
  if (typeof body.query !== "string") throw invalidRequest("'query' must be a string", "query");
  if (!Array.isArray(body.documents)) {
    throw invalidRequest("'documents' must be an array", "documents");
  }
  return body.query;
}

/** A valid `x-smg-routing-tokens` header (comma-separated u32 ids), else null. */
export function parseRoutingTokens(value: string | null): number[] | null {
  if (!value || value.length > MAX_TOKEN_HEADER_BYTES) return null;
  const parts = value.split(",");
  if (parts.length > MAX_TOKEN_HEADER_IDS) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^[0-9]{1,10}$/.test(p)) return null;
    const n = Number(p);
    if (n > 0xffffffff) return null;
    out.push(n);
  }
  return out;
}

/** The first configured routing-key header with a valid value (non-empty, ≤ 128 bytes). */
export function routingKeyFrom(headers: HeaderMap, names: readonly string[]): string | null {
  for (const name of names) {
    const v = headers.get(name);
    // Header values arrive as byte strings (one char per byte), so length is the byte count.
    if (v && v.length <= MAX_KEY_BYTES) return v;
  }
  return null;
}

/**
 * A session key from a rid-like value: one trailing `_r<digits>`, then one trailing
 * `_t<digits>` removed (`conv_t2_r1` → `conv`); the original if that leaves nothing; null if
 * empty or over 128 bytes.
 */
export function sessionKey(id: string): string | null {
  let k = id.replace(/_r[0-9]+$/, "");
  k = k.replace(/_t[0-9]+$/, "");
  if (k === "") k = id;
  if (k === "" || new TextEncoder().encode(k).length > MAX_KEY_BYTES) return null;
  return k;
}

/** Validates `body` for `endpoint` and extracts the routing inputs. */
export function extractRouteRequest(
  endpoint: Endpoint,
  body: unknown,
  headers: HeaderMap,
  opts: ExtractOptions,
): RouteRequest {
  if (!isObj(body)) {
    throw invalidRequest(`request body must be a JSON object, got ${typeName(body)}`);
  }
  optionalType(body, "model", "string");
  optionalType(body, "stream", "boolean");
  optionalType(body, "stream_options", "object");
  optionalInt(body, "max_tokens", 0);
  optionalInt(body, "max_completion_tokens", 0);
  optionalInt(body, "n", 1);
  const model = typeof body.model === "string" && body.model !== "" ? body.model : null;
  if (
    model === null &&
    (endpoint === "chat" || endpoint === "completions" || endpoint === "embeddings")
  ) {
    throw invalidRequest("'model' is required", "model");
  }

  let text = "";
  let tokens: number[] | null = null;
  switch (endpoint) {
    case "chat":
      text = chatText(body);
      break;
    case "completions":
      text = promptText(body);
      tokens = promptTokenIds(body.prompt);
      break;
    case "generate": {
      const g = generateInputs(body);
      text = g.text;
      tokens = g.tokens;
      break;
    }
    case "embeddings":
      text = embeddingText(body);
      break;
    case "rerank":
      text = rerankText(body);
      break;
  }
  const headerTokens = parseRoutingTokens(headers.get("x-smg-routing-tokens"));
  const routingKey = routingKeyFrom(headers, opts.routingKeyHeaders);
  const rid = typeof body.rid === "string" ? body.rid : null;
  const override = opts.routingKeyOverride === true;
  const ridKey = override && rid !== null ? sessionKey(rid) : null;
  const headerKey = routingKey !== null && override ? sessionKey(routingKey) : routingKey;
  return {
    endpoint,
    model,
    stream: body.stream === true,
    text,
    tokens: headerTokens ?? tokens,
    charsPerToken: opts.charsPerToken?.(model) ?? DEFAULT_CHARS_PER_TOKEN,
    headers,
    routingKey,
    rid,
    ridKey,
    stickyKey: ridKey ?? headerKey,
  };
}
