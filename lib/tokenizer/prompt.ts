/**
 * A request's prompt as token ids, the one way the gateway reads it: to route on its tokens
 * (KV-event mode, gRPC-only models) and to send it to gRPC workers; and the way a simulated
 * worker given the same tokenizer reads it, so the blocks its engine reports are the ones the
 * gateway looks up. Chat: the model's chat template over the messages (text parts joined, a turn
 * without content as empty text, `tools` and `chat_template_kwargs` passed on), encoded without
 * special tokens (the template writes them, as sglang does). Completions and `/generate`: the
 * text encoded with special tokens, or the token ids given. Bad input is a 400 naming the field.
 */

import { GatewayError, invalidRequest } from "../core/errors.ts";
import type { Endpoint } from "../core/types.ts";
import type { TemplateMessage } from "./tokenizer.ts";

type Obj = Record<string, unknown>;

/** What reading a prompt needs of the tokenizer. */
export interface PromptTokenizer {
  /** Token ids (cached). */
  encode(text: string, addSpecial: boolean): number[];
  /** The same ids, encoded off the event loop where the tokenizer can (`pool.ts`). */
  encodeAsync?(text: string, addSpecial: boolean): Promise<number[]>;
  /** Characters of `text` an encode would still encode, its cache aside (default all). */
  pendingChars?(text: string, addSpecial: boolean): number;
  /** The chat prompt of `messages`. */
  applyChatTemplate(
    messages: readonly TemplateMessage[],
    o: { tools?: unknown; kwargs?: Record<string, unknown>; addGenerationPrompt?: boolean },
  ): string;
  /** Whether there is a chat template. */
  readonly hasChatTemplate: boolean;
  /** The model's context length, when known. */
  readonly maxLength: number | null;
  /** Ids that end generation (trimmed from answers, as sglang's detokenizer does). */
  readonly eosTokenIds: readonly number[];
}

/** A request's prompt. */
export interface Prompt {
  /** Its token ids (never empty). */
  ids: number[];
  /** Its text, when it was given as text ("" for token ids). */
  text: string;
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** A list of token ids, or a 400 naming `param`. */
export function tokenIds(v: unknown, param: string): number[] {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0)) return v as number[];
  throw invalidRequest(`${param} must be a list of token ids`, param);
}

/** The text of a chat message's content (a string, or text parts). */
function contentText(content: unknown): unknown {
  if (!Array.isArray(content)) return content;
  return content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
}

/** A prompt before encoding: the ids given, or the text and how it is encoded. */
interface PromptSource {
  text: string;
  ids: number[] | null;
  addSpecial: boolean;
}

/** The prompt of `body` on `endpoint` before encoding (the chat template applied), or a 400. */
function promptSource(endpoint: Endpoint, body: Obj, tok: PromptTokenizer): PromptSource {
  if (endpoint === "chat") {
    if (!tok.hasChatTemplate) {
      throw new GatewayError(400, "invalid_request", "the model's tokenizer has no chat template", {
        type: "invalid_request_error",
      });
    }
    if (!Array.isArray(body.messages)) throw invalidRequest("messages must be a list", "messages");
    // A turn without content (an assistant's tool calls) renders as empty text.
    const messages = (body.messages as Obj[]).map((m) => ({
      ...m,
      content: contentText(m.content) ?? "",
    }));
    const kwargs = isObj(body.chat_template_kwargs) ? body.chat_template_kwargs : undefined;
    try {
      const text = tok.applyChatTemplate(messages as TemplateMessage[], {
        tools: body.tools,
        kwargs,
      });
      return { text, ids: null, addSpecial: false };
    } catch (e) {
      throw invalidRequest(
        `the model's chat template refused the messages: ${(e as Error).message}`,
        "messages",
      );
    }
  } else if (endpoint === "completions") {
    const p = body.prompt;
    if (typeof p === "string") return { text: p, ids: null, addSpecial: true };
    if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isInteger(t))) {
      return { text: "", ids: p as number[], addSpecial: true };
    }
    throw invalidRequest(
      "prompt must be a string or a list of token ids for gRPC workers",
      "prompt",
    );
  } else if (endpoint === "generate") {
    if (Array.isArray(body.input_ids)) {
      return { text: "", ids: tokenIds(body.input_ids, "input_ids"), addSpecial: true };
    }
    if (typeof body.text === "string") return { text: body.text, ids: null, addSpecial: true };
    throw invalidRequest("text or input_ids is required", "text");
  }
  throw new GatewayError(400, "invalid_request", `${endpoint} is not served by gRPC workers`, {
    type: "invalid_request_error",
  });
}

function prompt(ids: number[], text: string): Prompt {
  if (ids.length === 0) throw invalidRequest("the prompt has no tokens", "prompt");
  return { ids, text };
}

/** The prompt of `body` (validated by route extraction) on `endpoint`, tokenized by `tok`. */
export function promptOf(endpoint: Endpoint, body: Obj, tok: PromptTokenizer): Prompt {
  const s = promptSource(endpoint, body, tok);
  return prompt(s.ids ?? tok.encode(s.text, s.addSpecial), s.text);
}

/**
 * How many characters encoding `body`'s prompt would take, what `tok`'s cache holds aside: 0 for
 * token ids or a cached prompt. Throws a 400 as `promptOf` would.
 */
export function promptEncodeChars(endpoint: Endpoint, body: Obj, tok: PromptTokenizer): number {
  const s = promptSource(endpoint, body, tok);
  if (s.ids !== null) return 0;
  return tok.pendingChars?.(s.text, s.addSpecial) ?? s.text.length;
}

/** `promptOf`, encoded off the event loop where `tok` can. */
export async function promptOfAsync(
  endpoint: Endpoint,
  body: Obj,
  tok: PromptTokenizer,
): Promise<Prompt> {
  const s = promptSource(endpoint, body, tok);
  const encode = tok.encodeAsync ?? ((t: string, a: boolean) => Promise.resolve(tok.encode(t, a)));
  return prompt(s.ids ?? await encode.call(tok, s.text, s.addSpecial), s.text);
}
