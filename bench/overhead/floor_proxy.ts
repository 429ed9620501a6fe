/**
 * The floor: the cheapest Deno proxy for this request shape among those built on `fetch`,
 * `node:http` or `undici` (measured side by side before the gateway had its own client), for
 * `run.ts --floor`. `Deno.serve` + `fetch` with `--unstable-no-legacy-abort`, body read once as
 * bytes and parsed, round robin over the workers, same bytes forwarded with the client's
 * signal, upstream body returned untouched. No metrics, retries, timeouts or header filtering: it
 * shows how much of the gateway's cost is Deno's own.
 *
 *   deno run --unstable-no-legacy-abort --allow-net=127.0.0.1 bench/overhead/floor_proxy.ts \
 *     --port 30081 http://127.0.0.1:31101 http://127.0.0.1:31102
 */

const decoder = new TextDecoder();

/** Builds the handler over `workers` (base URLs). */
export function floorHandler(workers: string[]): (req: Request) => Promise<Response> {
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
    const worker = workers[next++ % workers.length];
    try {
      const up = await fetch(worker + path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: bytes,
        signal: req.signal,
      });
      return new Response(up.body, {
        status: up.status,
        headers: { "content-type": up.headers.get("content-type") ?? "application/json" },
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
    console.error("usage: floor_proxy.ts --port P WORKER_URL...");
    Deno.exit(2);
  }
  Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, floorHandler(workers));
}
