/**
 * A minimal OpenAI-compatible worker that answers at once, for the overhead benchmark: the same
 * worker stands behind every target (direct, gateway, HAProxy), so the differences are the proxy's.
 *
 *   deno run --allow-net=127.0.0.1 bench/overhead/instant_worker.ts --port 31101
 *
 * - `GET /health` → `OK`
 * - `GET /v1/models` → one model, `sim-model`
 * - `POST /v1/completions`, `/v1/chat/completions` → a small JSON completion, or with
 *   `"stream": true` a few SSE `data:` events then `data: [DONE]`
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

function sse(chat: boolean): Uint8Array<ArrayBuffer> {
  const id = `cmpl-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  let out = "";
  const tokens = ["o", "k", "!"];
  tokens.forEach((t, i) => {
    const last = i === tokens.length - 1;
    const chunk = chat
      ? {
        id,
        object: "chat.completion.chunk",
        created,
        model: MODEL,
        choices: [{ index: 0, delta: { content: t }, finish_reason: last ? "length" : null }],
      }
      : {
        id,
        object: "text_completion",
        created,
        model: MODEL,
        choices: [{ index: 0, text: t, finish_reason: last ? "length" : null }],
      };
    out += `data: ${JSON.stringify(chunk)}\n\n`;
  });
  return enc.encode(out + "data: [DONE]\n\n");
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

if (import.meta.main) {
  const i = Deno.args.indexOf("--port");
  const port = i >= 0 ? Number(Deno.args[i + 1]) : 31101;
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    console.error(`instant_worker: bad --port ${Deno.args[i + 1]}`);
    Deno.exit(2);
  }
  Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, handle);
}
