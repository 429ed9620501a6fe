/**
 * The gateway-side tokenizer (`--model-path` / `--tokenizer-path`): a Hugging Face
 * `tokenizer.json` run by `npm:@huggingface/tokenizers`, its `tokenizer_config.json` (special
 * tokens, `eos_token`, the chat template) and the chat template rendered by
 * `npm:@huggingface/jinja`. No hand-written BPE or Jinja. Loaded once at start: a path that does
 * not hold a loadable tokenizer is a `ConfigError` (one line, exit 2).
 *
 * Chat prompts are encoded without adding special tokens (the template writes them, as sglang
 * does); completion prompts and `/generate` text with them (the tokenizer's post-processor, as
 * Hugging Face's default).
 */

import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { ConfigError } from "../core/errors.ts";

/** One chat message as the template reads it. */
export interface TemplateMessage {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}

/** Options of `applyChatTemplate`. */
export interface TemplateOptions {
  /** End with the assistant's turn opened (default true). */
  addGenerationPrompt?: boolean;
  /** OpenAI `tools`, passed to the template. */
  tools?: unknown;
  /** Extra template variables (OpenAI `chat_template_kwargs`, e.g. `enable_thinking`). */
  kwargs?: Record<string, unknown>;
}

/** A token string of the config: plain, or `{content}` (an `AddedToken` in the JSON). */
function tokenText(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { content?: unknown }).content === "string") {
    return (v as { content: string }).content;
  }
  return null;
}

/** The chat template of a config: a string, or a list of named ones (`default` first). */
function templateText(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) {
    const named = v as { name?: unknown; template?: unknown }[];
    const pick = named.find((t) => t.name === "default") ?? named[0];
    return typeof pick?.template === "string" ? pick.template : null;
  }
  return null;
}

/**
 * How to build the same `GatewayTokenizer` in another thread: the path it was loaded from (the
 * thread reads it again, so this one keeps nothing of the files), or the parts it was built from.
 */
export type TokenizerInit =
  | { path: string }
  | { json: unknown; config: Record<string, unknown>; source: string; template?: string };

/** A loaded tokenizer with its chat template. */
export class GatewayTokenizer {
  /** Where it came from (for logs and errors). */
  readonly source: string;
  /** How to build it again (`TokenizerInit`). */
  readonly init: TokenizerInit;
  /** Token ids that end generation (`eos_token` and the config's `eos_token_id`s). */
  readonly eosTokenIds: readonly number[];
  /**
   * The texts of the added tokens (special or not) matched before normalization, longest
   * first: where an encoding splits exactly. (Tokens with `normalized: true` are matched after
   * normalizing, which can join text across them.)
   */
  readonly addedTokens: readonly string[];
  /** Whether an added token strips whitespace on its left (then splitting a text is not exact). */
  readonly addedTokensStripLeft: boolean;
  /** Vocabulary size, added tokens included. */
  readonly vocabSize: number;
  /** The largest context the config declares (`model_max_length`), or null. */
  readonly maxLength: number | null;
  readonly #tok: Tokenizer;
  readonly #template: Template | null;
  readonly #bos: string;
  readonly #eos: string;

  /** Builds it from parsed files; `path`: where `loadTokenizer` read them. */
  constructor(
    json: unknown,
    config: Record<string, unknown>,
    source: string,
    template?: string,
    path?: string,
  ) {
    this.source = source;
    this.init = path !== undefined ? { path } : { json, config, source, template };
    this.#tok = new Tokenizer(json as object, config);
    const text = template ?? templateText(config.chat_template);
    this.#template = text ? new Template(text) : null;
    this.#bos = tokenText(config.bos_token) ?? "";
    this.#eos = tokenText(config.eos_token) ?? "";
    const added = [...this.#tok.get_added_tokens_decoder().values()];
    this.addedTokens = added.filter((t) => !t.normalized).map((t) => t.content)
      .sort((a, b) => b.length - a.length);
    this.addedTokensStripLeft = added.some((t) => t.lstrip);
    const eos = new Set<number>();
    const eosId = this.#eos ? this.#tok.token_to_id(this.#eos) : undefined;
    if (eosId !== undefined) eos.add(eosId);
    for (const id of [config.eos_token_id].flat()) if (typeof id === "number") eos.add(id);
    this.eosTokenIds = [...eos];
    this.vocabSize = this.#tok.get_vocab(true).size;
    const max = config.model_max_length;
    this.maxLength = typeof max === "number" && max > 0 && max < 1e12 ? max : null;
  }

  /** Whether the config has a chat template. */
  get hasChatTemplate(): boolean {
    return this.#template !== null;
  }

  /** Token ids of `text`; `addSpecial` runs the post-processor (BOS and the like). */
  encode(text: string, addSpecial: boolean): number[] {
    return this.#tok.encode(text, { add_special_tokens: addSpecial }).ids;
  }

  /** The text of `ids`. */
  decode(ids: readonly number[], skipSpecial = true): string {
    if (ids.length === 0) return "";
    return this.#tok.decode(ids as number[], {
      skip_special_tokens: skipSpecial,
      clean_up_tokenization_spaces: false,
    });
  }

  /** The id of a token string, if it is in the vocabulary. */
  tokenId(token: string): number | undefined {
    return this.#tok.token_to_id(token);
  }

  /** The chat prompt for `messages`, as the model's template writes it. */
  applyChatTemplate(messages: readonly TemplateMessage[], o: TemplateOptions = {}): string {
    if (!this.#template) {
      throw new Error(`the tokenizer at ${this.source} has no chat template`);
    }
    return this.#template.render({
      ...o.kwargs,
      messages,
      tools: o.tools ?? undefined,
      add_generation_prompt: o.addGenerationPrompt ?? true,
      bos_token: this.#bos,
      eos_token: this.#eos,
    });
  }
}

async function readJson(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new ConfigError(`cannot read ${what} ${path}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${what} ${path} is not JSON: ${(e as Error).message}`);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Loads the tokenizer at `path`: a directory holding `tokenizer.json` (and usually
 * `tokenizer_config.json`, maybe `chat_template.jinja`), or a `tokenizer.json` file with its
 * config beside it. Throws `ConfigError` naming the path and what is wrong.
 */
export async function loadTokenizer(path: string): Promise<GatewayTokenizer> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (e) {
    throw new ConfigError(`tokenizer path ${path} cannot be read: ${(e as Error).message}`);
  }
  const dir = info.isDirectory ? path : path.replace(/\/[^/]*$/, "") || ".";
  const file = info.isDirectory ? `${dir}/tokenizer.json` : path;
  if (info.isDirectory && !(await exists(file))) {
    throw new ConfigError(`tokenizer path ${path} has no tokenizer.json`);
  }
  const json = await readJson(file, "tokenizer");
  const configPath = `${dir}/tokenizer_config.json`;
  const config = (await exists(configPath)) ? await readJson(configPath, "tokenizer config") : {};
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new ConfigError(`tokenizer config ${configPath} is not a JSON object`);
  }
  const jinja = `${dir}/chat_template.jinja`;
  const template = (await exists(jinja)) ? await Deno.readTextFile(jinja) : undefined;
  try {
    return new GatewayTokenizer(json, config as Record<string, unknown>, path, template, path);
  } catch (e) {
    throw new ConfigError(`tokenizer at ${path} cannot be loaded: ${(e as Error).message}`);
  }
}
