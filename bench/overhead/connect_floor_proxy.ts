/**
 * The connect floor: `floor_proxy.ts` with the project's own upstream client (`Http1Client`,
 * keep-alive HTTP/1.1 on `Deno.connect`) in place of `fetch`, for `run.ts --floor`. Body read
 * once as bytes and parsed, round robin over the workers, same bytes forwarded, cancelled with
 * the client's signal; a body already whole is returned as bytes, else relayed through a `ReadableStream`
 * that reads the worker on each pull. No metrics, retries, timeouts or header filtering: it
 * shows what the runtime plus our client cost, without the gateway's logic.
 *
 *   deno run --unstable-no-legacy-abort --allow-net=127.0.0.1 \
 *     bench/overhead/connect_floor_proxy.ts --port 30082 \
 *     http://127.0.0.1:31101 http://127.0.0.1:31102
 */

import { Http1Client } from "../../lib/upstream/http1.ts";
import { bodyStream } from "../../lib/proxy/http/relay.ts";
import { header } from "../../lib/upstream/types.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import { systemClock } from "../../lib/core/clock.ts";

const decoder = new TextDecoder();
const JSON_TYPE: [string, string][] = [["content-type", "application/json"]];

/** Builds the handler over `workers` (base URLs), sending with one `Http1Client`. */
export function connectFloorHandler(workers: string[]): (req: Request) => Promise<Response> {
  const client = new Http1Client({ idleTimeoutMs: 90_000, clock: systemClock });
  let next = 0;
  return async (req) => {
    const url = req.url;
    const path = url.slice(url.indexOf("/", url.indexOf("//") + 2));
    if (req.method === "GET") {
      return path === "/health" ? new Response("OK") : new Response(null, { status: 404 });
    }
    const bytes = await req.bytes();
    let body: { model?: unknown; prompt?: unknown };
    try {
      body = JSON.parse(decoder.decode(bytes));
    } catch {
      return new Response('{"error":{"message":"bad json"}}', { status: 400 });
    }
    if (typeof body?.model !== "string") return new Response(null, { status: 400 });
    const base = workers[next++ % workers.length];
    const cancel = new Cancel();
    req.signal.addEventListener("abort", () => cancel.cancel(req.signal.reason), { once: true });
    try {
      const up = await client.send({
        base,
        path,
        method: "POST",
        headers: JSON_TYPE,
        body: bytes,
        cancel,
      });
      return new Response(up.body.whole ?? bodyStream(up.body), {
        status: up.status,
        headers: { "content-type": header(up.headers, "content-type") ?? "application/json" },
      });
    } catch {
      return new Response(null, { status: 502 });
    }
  };
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--port");
  const port = Number(Deno.args[i + 1]);
  const workers = Deno.args.filter((a) => a.startsWith("http://"));
  if (i < 0 || !Number.isInteger(port) || workers.length === 0) {
    console.error("usage: connect_floor_proxy.ts --port P WORKER_URL...");
    Deno.exit(2);
  }
  Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, connectFloorHandler(workers));
}
