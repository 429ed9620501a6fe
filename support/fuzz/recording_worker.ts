/**
 * A worker for the fuzzers that is never at fault: it answers every inference request at once
 * (a JSON body, or a short event stream when the body asks for `stream: true`) and tells the
 * fuzzer about each one as it arrives (`onRequest`: path, the gateway's `x-request-id`, the raw
 * body), so a fuzzer can match what reached a worker against what its clients were answered.
 * Health, model and info routes answer as sglang's do; they are not reported.
 */

/** One inference request as the worker saw it. */
export interface Received {
  path: string;
  /** The `x-request-id` the gateway sent ("" when none). */
  requestId: string;
  /** The body as text. */
  body: string;
}

const INFERENCE = new Set([
  "/v1/chat/completions",
  "/v1/completions",
  "/generate",
  "/v1/embeddings",
  "/v1/rerank",
]);

const enc = new TextEncoder();

/** A running recording worker on a loopback port. */
export class RecordingWorker {
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  /** The model it serves. */
  readonly model: string;
  /** Inference requests received. */
  received = 0;

  /** Starts on a free port of 127.0.0.1 serving `model`; `onRequest` hears each inference request. */
  constructor(onRequest: (r: Received) => void = () => {}, model = "fuzz-model") {
    this.model = model;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (req) => {
        const path = new URL(req.url).pathname;
        if (!INFERENCE.has(path)) return this.#other(path);
        const body = await req.text();
        this.received++;
        onRequest({ path, requestId: req.headers.get("x-request-id") ?? "", body });
        return answer(body);
      },
    );
  }

  /** Base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  #other(path: string): Response {
    if (path === "/health" || path === "/health_generate") return new Response("OK");
    if (path === "/v1/models") {
      return Response.json({ object: "list", data: [{ id: this.model, object: "model" }] });
    }
    if (path === "/get_model_info") return Response.json({ model_path: this.model });
    if (path === "/get_server_info") return Response.json({ version: "fuzz" });
    return new Response("no such route", { status: 404 });
  }

  /** Stops the server. */
  async close(): Promise<void> {
    await this.#server.shutdown();
  }
}

/** A completion for `body`: streamed when it asks for a stream. */
function answer(body: string): Response {
  let stream = false;
  try {
    stream = (JSON.parse(body) as { stream?: unknown })?.stream === true;
  } catch { /* the gateway sent something it did not parse: answered plainly */ }
  if (!stream) {
    return Response.json({
      id: "cmpl-fuzz",
      object: "text_completion",
      choices: [{ index: 0, text: "ok", finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  }
  const events = [
    `data: {"choices":[{"index":0,"text":"o","finish_reason":null}]}\n\n`,
    `data: {"choices":[{"index":0,"text":"k","finish_reason":"stop"}]}\n\n`,
    "data: [DONE]\n\n",
  ];
  return new Response(
    new ReadableStream<Uint8Array>({
      pull(c) {
        const e = events.shift();
        if (e === undefined) c.close();
        else c.enqueue(enc.encode(e));
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );
}
