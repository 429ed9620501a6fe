/**
 * The simulated worker's HTTP face: sglang's and vLLM's endpoints over a `SimEngine`.
 * Inference requests are rendered (chat template) and tokenized (by the stand-in tokenizer, or as
 * the gateway does when given its tokenizer), submitted to the engine, and answered whole or as
 * SSE as the engine emits tokens; a client that leaves aborts its request.
 * Fault knobs: an error rate (500s), latency spikes, dying after N requests, hanging. PD roles:
 * a prefill worker computes the prompt and marks its bootstrap room ready; a decode worker waits
 * for the room, then decodes without prefilling (`pd.ts`).
 *
 * Load and counters are served the three ways gateways read them: `/v1/loads`, `/get_load` and
 * sglang-style Prometheus `/metrics`.
 */

import type { SimEngine } from "./engine.ts";
import { renderChat } from "./chat_template.ts";
import {
  type Api,
  completeBody,
  endFrames,
  errorBody,
  type ResponseContext,
  tokenFrame,
} from "./formats.ts";
import { getLoadBody, loadsBody, metricsText } from "./observe.ts";
import { awaitRoom, bootstrapOf, type BootstrapRooms } from "./pd.ts";
import { type SimTokenizer, WORD_TOKENIZER } from "./tokenizer.ts";
import type { GenerateInput, GenerateResult } from "./types.ts";

/** Behaviour of the simulated worker beyond the engine. */
export interface SimServerOptions {
  /** Served model id (`--model`, sim-model). */
  model: string;
  /** Output length when a request sets none (`--max-new-tokens`, 64). */
  maxNewTokens: number;
  /** Share of inference requests answered with a 500 (`--error-rate`, 0). */
  errorRate: number;
  /** Share of requests delayed by a latency spike (`--spike-rate`, 0). */
  spikeRate: number;
  /** Length of a spike in simulated ms (`--spike-ms`, 0). */
  spikeMs: number;
  /** Die after this many inference requests; 0 never (`--die-after`, 0). */
  dieAfter: number;
  /** Never answer inference requests (`--hang`, false). */
  hang: boolean;
  /** Uniform [0, 1) randomness for the fault knobs. */
  random: () => number;
  /** Sleeps `ms` simulated milliseconds (scaled to wall time). */
  sleep: (ms: number) => Promise<void>;
  /** Called once when the worker dies (`--die-after`). */
  onDie?: () => void;
  /** PD role (`--role`, regular). */
  role: "regular" | "prefill" | "decode";
  /** Prefill role: the rooms served on the bootstrap port. */
  rooms?: BootstrapRooms;
  /** Decode role: how long to wait for the prefill partner's room (ms, 30000). */
  bootstrapTimeoutMs: number;
  /**
   * Tokenizes prompts as the gateway does (`--model-path`), so the blocks the engine reports
   * are the token ids the gateway routes on; default: `tokenizer` and ChatML.
   */
  promptTokens?: PromptTokens;
  /**
   * The stand-in tokenizer of prompts without `promptTokens` (`--chars-per-token` picks
   * `RatioTokenizer`; default `WORD_TOKENIZER`). The engine's must match, so replies re-tokenize
   * to the ids it generated.
   */
  tokenizer?: Pick<SimTokenizer, "tokenize">;
}

type Obj = Record<string, unknown>;

class BadRequest extends Error {}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isTokens(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0);
}

/** A request's prompt as token ids: the gateway's tokenizer and chat template (`--model-path`). */
export type PromptTokens = (api: Api, body: Obj) => number[];

/**
 * `body` with one prompt: the first of a batch (`prompt: [text, ...]`, `text: [...]`,
 * `input_ids: [[...], ...]`), which is all the simulator serves.
 */
function firstPrompt(body: Obj): Obj {
  const one = { ...body };
  if (Array.isArray(body.prompt) && typeof body.prompt[0] === "string") one.prompt = body.prompt[0];
  if (Array.isArray(body.text)) one.text = body.text[0];
  if (Array.isArray(body.input_ids) && Array.isArray(body.input_ids[0])) {
    one.input_ids = body.input_ids[0];
  }
  return one;
}

/** The prompt's token ids by the stand-in tokenizer, ChatML rendering chat messages. */
function ownTokens(api: Api, body: Obj, tok: Pick<SimTokenizer, "tokenize">): number[] {
  if (api === "chat") {
    const messages = body.messages as Parameters<typeof renderChat>[0];
    try {
      return tok.tokenize(renderChat(messages, {
        continueFinalMessage: body.continue_final_message === true,
        addGenerationPrompt: body.add_generation_prompt !== false, // vLLM refuses both true
      }));
    } catch (e) {
      throw new BadRequest((e as Error).message);
    }
  }
  if (api === "completions") {
    const p = body.prompt;
    if (typeof p === "string") return tok.tokenize(p);
    if (isTokens(p)) return p;
    throw new BadRequest("'prompt' must be a string or token ids");
  }
  if (isTokens(body.input_ids)) return body.input_ids;
  if (typeof body.text === "string") return tok.tokenize(body.text);
  throw new BadRequest("one of 'text' or 'input_ids' is required");
}

/**
 * The prompt tokens and output length of a request body: its prompt tokenized by `promptTokens`
 * when given (a refusal is a 400 quoting it), else by the stand-in `tokenizer`.
 */
export function parseInference(
  api: Api,
  body: unknown,
  defaultMax: number,
  promptTokens?: PromptTokens,
  tokenizer: Pick<SimTokenizer, "tokenize"> = WORD_TOKENIZER,
): { tokens: number[]; max: number } {
  if (!isObj(body)) throw new BadRequest("request body must be a JSON object");
  let max: unknown;
  if (api === "chat") {
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new BadRequest("'messages' must be a non-empty array");
    }
    max = body.max_completion_tokens ?? body.max_tokens;
  } else if (api === "completions") max = body.max_tokens;
  else max = isObj(body.sampling_params) ? body.sampling_params.max_new_tokens : undefined;
  if (max !== undefined && max !== null && !(Number.isInteger(max) && (max as number) >= 0)) {
    throw new BadRequest("max tokens must be a non-negative integer");
  }
  const one = firstPrompt(body);
  let tokens: number[];
  if (promptTokens) {
    try {
      tokens = promptTokens(api, one);
    } catch (e) {
      throw new BadRequest((e as Error).message);
    }
  } else tokens = ownTokens(api, one, tokenizer);
  return { tokens, max: (max as number | undefined) ?? defaultMax };
}

/** Whether a request asks to sample: a `temperature` above 0 (sglang's in `sampling_params`). */
function samples(api: Api, body: Obj): boolean {
  const t = api === "generate" && isObj(body.sampling_params)
    ? body.sampling_params.temperature
    : body.temperature;
  return typeof t === "number" && t > 0;
}

const PATHS: Record<string, Api> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/generate": "generate",
};

/** The simulated worker's request handler. */
export class SimServer {
  readonly #engine: SimEngine;
  readonly #o: SimServerOptions;
  readonly #inflight = new Set<AbortController>();
  #served = 0;
  #dead = false;
  #seq = 0;

  /** Serves `engine` with the fault behaviour of `opts`. */
  constructor(engine: SimEngine, opts: SimServerOptions) {
    this.#engine = engine;
    this.#o = opts;
  }

  /** Whether `--die-after` has been reached. */
  get dead(): boolean {
    return this.#dead;
  }

  /** Handles one HTTP request. */
  readonly handle = async (req: Request): Promise<Response> => {
    const path = new URL(req.url).pathname;
    const api = PATHS[path];
    if (api && req.method === "POST") return await this.#inference(req, api);
    if (req.method === "GET") {
      switch (path) {
        case "/health":
        case "/health_generate":
          return new Response("OK");
        case "/v1/models":
          return Response.json({
            object: "list",
            data: [{
              id: this.#o.model,
              object: "model",
              created: 0,
              owned_by: "sglang",
              root: this.#o.model,
              max_model_len: 32768,
            }],
          });
        case "/get_model_info":
          return Response.json({
            model_path: this.#o.model,
            tokenizer_path: this.#o.model,
            is_generation: true,
          });
        case "/get_server_info": {
          const s = this.#engine.stats();
          return Response.json({
            model_path: this.#o.model,
            served_model_name: this.#o.model,
            max_running_requests: s.maxRunning,
            max_total_num_tokens: s.maxTokens,
            version: "smg-sim",
          });
        }
        case "/v1/loads":
          return Response.json(loadsBody(this.#engine.stats()));
        case "/get_load":
          return Response.json(getLoadBody(this.#engine.stats()));
        case "/metrics":
          return new Response(metricsText(this.#engine.stats(), this.#o.model), {
            headers: { "content-type": "text/plain; version=0.0.4" },
          });
      }
    }
    if (path === "/flush_cache" && (req.method === "POST" || req.method === "GET")) {
      return this.#engine.flushCache()
        ? new Response("Cache flushed.\n")
        : new Response("Cache not flushed: requests are running.\n", { status: 400 });
    }
    return Response.json(errorBody(`no route ${req.method} ${path}`, "not_found", 404), {
      status: 404,
    });
  };

  async #inference(req: Request, api: Api): Promise<Response> {
    const o = this.#o;
    if (o.dieAfter > 0 && ++this.#served > o.dieAfter) {
      this.#die();
      return new Response(null, { status: 503 });
    }
    let parsed: { tokens: number[]; max: number };
    let body: Obj;
    try {
      body = await req.json();
      parsed = parseInference(api, body, o.maxNewTokens, o.promptTokens, o.tokenizer);
    } catch (e) {
      const msg = e instanceof BadRequest ? e.message : `invalid JSON: ${(e as Error).message}`;
      return Response.json(errorBody(msg, "invalid_request_error", 400), { status: 400 });
    }
    if (o.errorRate > 0 && o.random() < o.errorRate) {
      return Response.json(errorBody("simulated engine error", "server_error", 500), {
        status: 500,
      });
    }
    const abort = new AbortController();
    this.#inflight.add(abort);
    const onGone = () => abort.abort();
    req.signal.addEventListener("abort", onGone, { once: true });
    const done = () => {
      this.#inflight.delete(abort);
      req.signal.removeEventListener("abort", onGone);
    };
    if (o.hang) {
      await new Promise<void>((resolve) =>
        abort.signal.addEventListener("abort", () => resolve(), { once: true })
      );
      done();
      return new Response(null, { status: 503 });
    }
    if (o.spikeRate > 0 && o.random() < o.spikeRate) await o.sleep(o.spikeMs);
    const ctx: ResponseContext = {
      id: `sim-${++this.#seq}`,
      model: typeof body.model === "string" ? body.model : o.model,
      created: Math.floor(Date.now() / 1000),
      includeUsage: isObj(body.stream_options) && body.stream_options.include_usage === true,
    };
    const input: GenerateInput = {
      tokens: parsed.tokens,
      maxNewTokens: parsed.max,
      signal: abort.signal,
      sample: samples(api, body),
    };
    const boot = o.role === "regular" ? null : bootstrapOf(body);
    if (boot && o.role === "prefill") {
      // The prefill leg computes the prompt and one token; its KV then waits in the room.
      input.maxNewTokens = 1;
    } else if (boot && o.role === "decode") {
      if (!(await awaitRoom(boot, o.bootstrapTimeoutMs, abort.signal))) {
        done();
        const msg = `bootstrap room ${boot.room} not ready at ${boot.host}:${boot.port}`;
        return Response.json(errorBody(msg, "server_error", 500), { status: 500 });
      }
      input.kvTransferred = true;
    }
    const finished = (r: GenerateResult) => {
      if (boot && o.role === "prefill" && r.finishReason === "length") {
        o.rooms?.markReady(boot.room);
      }
      return r;
    };
    if (body.stream !== true) {
      let text = "";
      const r = await this.#engine.submit(input, (_id, _i, piece) => (text += piece)).then(finished)
        .finally(done);
      if (abort.signal.aborted && req.signal.aborted) return new Response(null, { status: 499 });
      return Response.json(completeBody(api, ctx, text, r));
    }
    return this.#stream(api, ctx, input, abort, () => done(), finished);
  }

  #stream(
    api: Api,
    ctx: ResponseContext,
    input: GenerateInput,
    abort: AbortController,
    done: () => void,
    finished: (r: GenerateResult) => GenerateResult,
  ): Response {
    let soFar = "";
    let cancelled = false;
    const engine = this.#engine;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        engine.submit(input, (_id, i, piece) => {
          if (cancelled) return;
          soFar += piece;
          c.enqueue(tokenFrame(api, ctx, piece, soFar, i + 1));
        }).then(finished).then((r: GenerateResult) => {
          if (cancelled) return;
          // Aborted without the client leaving: the worker died mid-stream; cut the connection.
          if (abort.signal.aborted) return c.error(new Error("worker died"));
          for (const f of endFrames(api, ctx, soFar, r)) c.enqueue(f);
          c.close();
        }, (e) => cancelled || c.error(e)).finally(done);
      },
      cancel() {
        cancelled = true;
        abort.abort();
      },
    });
    return new Response(body, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }

  #die(): void {
    if (this.#dead) return;
    this.#dead = true;
    for (const a of this.#inflight) a.abort();
    this.#o.onDie?.();
  }
}
