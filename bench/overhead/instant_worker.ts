/**
 * A minimal OpenAI-compatible worker that answers at once, for the overhead benchmark: the same
 * worker stands behind every target (direct, gateway, HAProxy, nginx, the floors), so the
 * differences are the proxy's.
 *
 *   deno run --allow-net=127.0.0.1 bench/overhead/instant_worker.ts --port 31101 \
 *     [--tokens 3] [--token-ms 0]
 *
 * - `GET /health` → `OK`
 * - `GET /v1/models` → one model, `sim-model`
 * - `POST /v1/completions`, `/v1/chat/completions` → a small JSON completion at once, or with
 *   `"stream": true` `--tokens` SSE `data:` events (default 3) then `data: [DONE]`: all at once,
 *   or with `--token-ms MS` > 0 each token event `MS` ms after the previous one (paced, as a
 *   decode spaces them), `[DONE]` right after the last
 */

const MODEL = "sim-model";
const enc = new TextEncoder();

const JSON_HEADERS = { "content-type": "application/json" };
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };
const MODELS = JSON.stringify({ object: "list", data: [{ id: MODEL, object: "model" }] });

let seq = 0;

function completion(chat: boolean): string {
  const id = `cmpl-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
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
          finish_reason: "length",
        }],
        usage,
      }
      : {
        id,
        object: "text_completion",
        created,
        model: MODEL,
        choices: [{ index: 0, text: "ok", finish_reason: "length", logprobs: null }],
        usage,
      },
  );
}

/** Token events per stream (`--tokens`) and ms between them (`--token-ms`; 0: all at once). */
let tokens = 3;
let tokenMs = 0;

const TEXT = ["o", "k", "!"];

/** The `i`-th of `n` token events of stream `id`. */
function event(chat: boolean, id: string, created: number, i: number, n: number): string {
  const t = TEXT[i % TEXT.length];
  const finish = i === n - 1 ? "length" : null;
  const chunk = chat
    ? {
      id,
      object: "chat.completion.chunk",
      created,
      model: MODEL,
      choices: [{ index: 0, delta: { content: t }, finish_reason: finish }],
    }
    : {
      id,
      object: "text_completion",
      created,
      model: MODEL,
      choices: [{ index: 0, text: t, finish_reason: finish }],
    };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

const DONE = enc.encode("data: [DONE]\n\n");

function sse(chat: boolean): BodyInit {
  const id = `cmpl-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  if (tokenMs <= 0) {
    let out = "";
    for (let i = 0; i < tokens; i++) out += event(chat, id, created, i, tokens);
    return enc.encode(out + "data: [DONE]\n\n");
  }
  let i = 0;
  let cancelled = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (i === tokens) {
        c.enqueue(DONE);
        c.close();
        return;
      }
      await new Promise((r) => setTimeout(r, tokenMs));
      if (!cancelled) c.enqueue(enc.encode(event(chat, id, created, i++, tokens)));
    },
    cancel() {
      cancelled = true;
    },
  });
}

/** The worker's request handler. */
export async function handle(req: Request): Promise<Response> {
  const url = req.url;
  const path = url.slice(url.indexOf("/", url.indexOf("//") + 2)).split("?")[0];
  if (req.method === "GET") {
    if (path === "/health") return new Response("OK");
    if (path === "/v1/models") return new Response(MODELS, { headers: JSON_HEADERS });
    return new Response(null, { status: 404 });
  }
  if (req.method === "POST" && (path === "/v1/completions" || path === "/v1/chat/completions")) {
    const chat = path === "/v1/chat/completions";
    let stream = false;
    try {
      const body = await req.json();
      stream = body?.stream === true;
    } catch {
      return new Response('{"error":{"message":"bad json"}}', {
        status: 400,
        headers: JSON_HEADERS,
      });
    }
    if (stream) return new Response(sse(chat), { headers: SSE_HEADERS });
    return new Response(completion(chat), { headers: JSON_HEADERS });
  }
  return new Response(null, { status: 404 });
}

function intFlag(name: string, dflt: number, min: number, max: number): number {
  const i = Deno.args.indexOf(name);
  if (i < 0) return dflt;
  const n = Number(Deno.args[i + 1]);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(
      `instant_worker: ${name} needs an integer in ${min}..${max}, got ${Deno.args[i + 1]}`,
    );
    Deno.exit(2);
  }
  return n;
}

if (import.meta.main) {
  const port = intFlag("--port", 31101, 1, 65535);
  tokens = intFlag("--tokens", 3, 1, 100_000);
  tokenMs = intFlag("--token-ms", 0, 0, 60_000);
  Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, handle);
}
