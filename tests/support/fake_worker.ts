/**
 * A tiny sglang/OpenAI-compatible worker for tests, on a real loopback port, with knobs for the
 * failures the gateway must survive: error statuses, hanging, dying or stalling mid-stream, a
 * stream held after its first chunk until the test releases it; and counters of what it saw
 * (requests, aborted streams, in-flight), with an event on each change (`subscribe`) so tests
 * wait on them instead of polling. Not the simulated engine: no cache or batching model.
 */

/** How the worker answers inference requests. */
export type Mode =
  | { kind: "ok" }
  | { kind: "status"; status: number; body?: string }
  | { kind: "hang" }
  | { kind: "die_mid_stream"; afterChunks: number }
  | { kind: "stall_mid_stream"; afterChunks: number }
  | { kind: "die_before_body" };

/** Knobs. */
export interface FakeWorkerOptions {
  /** Model id served; null means `/v1/models` answers 404. */
  model?: string | null;
  /** Streamed chunks per request (default 3). */
  chunks?: number;
  /** Streams send their first chunk, then wait for this before the rest (default null). */
  gate?: Promise<void> | null;
  /** Behaviour (default ok). */
  mode?: Mode;
  /** `/health` status (default 200). */
  healthStatus?: number;
  /** `/v1/loads` body, or null for 404 (default null). */
  loads?: unknown;
  /** The usage a whole answer reports (default 3 prompt and 2 completion tokens). */
  usage?: { prompt: number; completion: number };
}

/** What the worker observed. */
export interface Seen {
  /** Inference requests received. */
  requests: number;
  /** Streams the client abandoned. */
  aborted: number;
  /** Requests being answered now. */
  active: number;
  /** Last request body. */
  lastBody: unknown;
  /** Last request headers. */
  lastHeaders: Headers | null;
  /** Health probes received. */
  probes: number;
  /** flush_cache calls received. */
  flushes: number;
}

const enc = new TextEncoder();

/** A running fake worker. */
export class FakeWorker {
  /** Knobs, changeable while running. */
  opts: Required<FakeWorkerOptions>;
  /** Counters. */
  readonly seen: Seen = {
    requests: 0,
    aborted: 0,
    active: 0,
    lastBody: null,
    lastHeaders: null,
    probes: 0,
    flushes: 0,
  };
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #hung = new Set<() => void>();
  readonly #listeners = new Set<() => void>();

  readonly #host: string;

  /** Starts on a free port of `at.hostname` (127.0.0.1), or `at.port`. */
  constructor(opts: FakeWorkerOptions = {}, at: { hostname?: string; port?: number } = {}) {
    this.#host = at.hostname ?? "127.0.0.1";
    this.opts = {
      model: "test-model",
      chunks: 3,
      gate: null,
      mode: { kind: "ok" },
      healthStatus: 200,
      loads: null,
      usage: { prompt: 3, completion: 2 },
      ...opts,
    };
    this.#server = Deno.serve(
      { hostname: this.#host, port: at.port ?? 0, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  /** Base URL. */
  get url(): string {
    return `http://${this.#host}:${this.#server.addr.port}`;
  }

  /** Calls `listener` after every change of `seen`; returns its removal. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Stops the server, releasing hung requests. */
  async close(): Promise<void> {
    for (const release of this.#hung) release();
    await this.#server.shutdown();
  }

  #changed(): void {
    for (const l of this.#listeners) l();
  }

  async #handle(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const o = this.opts;
    if (path === "/health") {
      this.seen.probes++;
      return new Response(o.healthStatus === 200 ? "OK" : "down", { status: o.healthStatus });
    }
    if (path === "/v1/models") {
      if (o.model === null) return new Response("not found", { status: 404 });
      return Response.json({
        object: "list",
        data: [{ id: o.model, object: "model", owned_by: "sglang" }],
      });
    }
    if (path === "/get_model_info") {
      return o.model === null
        ? new Response("not found", { status: 404 })
        : Response.json({ model_path: o.model });
    }
    if (path === "/get_server_info") return Response.json({ version: "fake", model: o.model });
    if (path === "/health_generate") return new Response("OK");
    if (path === "/flush_cache") {
      this.seen.flushes++;
      return new Response("Cache flushed");
    }
    if (path === "/v1/loads") {
      return o.loads === null ? new Response("no", { status: 404 }) : Response.json(o.loads);
    }
    if (
      !["/v1/chat/completions", "/v1/completions", "/generate", "/v1/embeddings", "/v1/rerank"]
        .includes(path)
    ) {
      return new Response("no such route", { status: 404 });
    }
    this.seen.requests++;
    this.seen.lastHeaders = req.headers;
    const body = await req.json();
    this.seen.lastBody = body;
    this.#changed();
    const mode = o.mode;
    if (mode.kind === "status") {
      return new Response(
        mode.body ?? JSON.stringify({ error: { message: `fake ${mode.status}` } }),
        {
          status: mode.status,
          headers: { "content-type": "application/json" },
        },
      );
    }
    if (mode.kind === "hang") {
      this.seen.active++;
      this.#changed();
      await new Promise<void>((resolve) => {
        const release = () => {
          this.#hung.delete(release);
          resolve();
        };
        this.#hung.add(release);
        req.signal.addEventListener("abort", release, { once: true });
      });
      this.seen.active--;
      if (req.signal.aborted) this.seen.aborted++;
      this.#changed();
      return new Response("released", { status: 500 });
    }
    if (mode.kind === "die_before_body") {
      return new Response(
        new ReadableStream({
          pull(c) {
            c.error(new Error("worker died"));
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    }
    const stream = (body as { stream?: boolean }).stream === true;
    if (!stream) {
      return Response.json({
        id: "cmpl-fake",
        object: path === "/v1/chat/completions" ? "chat.completion" : "text_completion",
        model: (body as { model?: string }).model ?? o.model,
        choices: path === "/v1/chat/completions"
          ? [{
            index: 0,
            message: { role: "assistant", content: "hello from " + this.url },
            finish_reason: "stop",
          }]
          : [{ index: 0, text: "hello from " + this.url, finish_reason: "stop" }],
        text: path === "/generate" ? "hello" : undefined,
        usage: {
          prompt_tokens: o.usage.prompt,
          completion_tokens: o.usage.completion,
          total_tokens: o.usage.prompt + o.usage.completion,
        },
      }, { headers: { "x-worker": this.url } });
    }
    return this.#stream(req, path, mode);
  }

  #stream(req: Request, path: string, mode: Mode): Response {
    const o = this.opts;
    let sent = 0;
    this.seen.active++;
    this.#changed();
    let finished = false;
    const finish = (aborted: boolean) => {
      if (finished) return;
      finished = true;
      this.seen.active--;
      if (aborted) this.seen.aborted++;
      this.#changed();
    };
    const chunk = (i: number) => {
      const obj = path === "/v1/chat/completions"
        ? {
          id: "c",
          object: "chat.completion.chunk",
          model: o.model,
          choices: [{ index: 0, delta: { content: `t${i} ` }, finish_reason: null }],
        }
        : path === "/generate"
        ? { text: `t${i}`, meta_info: { completion_tokens: i + 1 } }
        : {
          id: "c",
          object: "text_completion",
          model: o.model,
          choices: [{ index: 0, text: `t${i} `, finish_reason: null }],
        };
      return enc.encode(`data: ${JSON.stringify(obj)}\n\n`);
    };
    return new Response(
      new ReadableStream<Uint8Array>({
        pull: async (c) => {
          if (mode.kind === "die_mid_stream" && sent >= mode.afterChunks) {
            finish(false);
            c.error(new Error("worker died mid-stream"));
            return;
          }
          if (mode.kind === "stall_mid_stream" && sent >= mode.afterChunks) {
            // Never another byte: released by close().
            return new Promise<void>((resolve) => this.#hung.add(resolve));
          }
          if (sent === 1 && o.gate) await o.gate;
          if (req.signal.aborted) return;
          if (sent < o.chunks) {
            c.enqueue(chunk(sent++));
            return;
          }
          c.enqueue(enc.encode("data: [DONE]\n\n"));
          c.close();
          finish(false);
        },
        cancel: () => finish(true),
      }),
      { headers: { "content-type": "text/event-stream", "x-worker": this.url } },
    );
  }
}

/** A TCP server that answers every connection with bytes that are not HTTP, then closes. */
export class GarbageServer {
  readonly #listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr>;
  readonly #done: Promise<void>;

  /** Starts on a free loopback port. */
  constructor() {
    const listener = this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#done = (async () => {
      for await (const conn of listener) {
        try {
          const buf = new Uint8Array(65536);
          await conn.read(buf);
          await conn.write(enc.encode("\x00\x01garbage that is not HTTP\r\n\r\n"));
        } catch { /* client gone */ }
        conn.close();
      }
    })().catch(() => {});
  }

  /** Base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  /** Stops listening. */
  async close(): Promise<void> {
    this.#listener.close();
    await this.#done;
  }
}
