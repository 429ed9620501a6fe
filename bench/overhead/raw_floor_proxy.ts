/**
 * The raw floor: a proxy whose front is a bare HTTP/1.1 server on `Deno.listen` instead of
 * `Deno.serve`, with the gateway's `Http1Client` behind it, for `run.ts --floor`: the floor the
 * gateway's own front (`lib/front/`) stands on: no `Request`, `Response` or `Headers` objects, the response head and body
 * in one write, SSE relayed as chunked frames. Round robin over the workers, the body read by its
 * `content-length` and parsed, keep-alive; no chunked request bodies, no pipelining, no limits, no
 * metrics, retries or timeouts: a measurement, not a server.
 *
 *   deno run --allow-net=127.0.0.1 bench/overhead/raw_floor_proxy.ts --port 30083 \
 *     http://127.0.0.1:31101 http://127.0.0.1:31102
 */

import { Http1Client } from "../../lib/upstream/http1.ts";
import { header, type HeaderList } from "../../lib/upstream/types.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import { systemClock } from "../../lib/core/clock.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const JSON_TYPE: HeaderList = [["content-type", "application/json"]];
const OK = enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nOK");

async function writeAll(c: Deno.Conn, b: Uint8Array): Promise<void> {
  for (let off = 0; off < b.length;) off += await c.write(off ? b.subarray(off) : b);
}

/** One framed chunk of `data`. */
function chunk(data: Uint8Array): Uint8Array {
  const head = enc.encode(`${data.length.toString(16)}\r\n`);
  const out = new Uint8Array(head.length + data.length + 2);
  out.set(head);
  out.set(data, head.length);
  out.set([13, 10], head.length + data.length);
  return out;
}

/** Serves one client connection until it closes. */
async function serveConn(
  conn: Deno.TcpConn,
  client: Http1Client,
  workers: string[],
  next: () => number,
) {
  conn.setNoDelay(true);
  let buf = new Uint8Array(16384);
  let start = 0;
  let end = 0;
  const more = async (): Promise<boolean> => {
    if (start === end) start = end = 0;
    if (end === buf.length) {
      const bigger = new Uint8Array(buf.length * 2);
      bigger.set(buf.subarray(start, end));
      end -= start;
      start = 0;
      buf = bigger;
    }
    const n = await conn.read(buf.subarray(end));
    if (n === null) return false;
    end += n;
    return true;
  };
  try {
    for (;;) {
      let headEnd = -1;
      while ((headEnd = dec.decode(buf.subarray(start, end)).indexOf("\r\n\r\n")) < 0) {
        if (!(await more())) return;
      }
      const head = dec.decode(buf.subarray(start, start + headEnd));
      const bodyStart = start + headEnd + 4;
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const length = m ? Number(m[1]) : 0;
      while (end - bodyStart < length) if (!(await more())) return;
      const body = buf.slice(bodyStart, bodyStart + length);
      start = bodyStart + length;
      const sp = head.indexOf(" ");
      const path = head.slice(sp + 1, head.indexOf(" ", sp + 1));
      if (head.startsWith("GET ")) {
        await writeAll(conn, OK);
        continue;
      }
      JSON.parse(dec.decode(body));
      const up = await client.send({
        base: workers[next() % workers.length],
        path,
        method: "POST",
        headers: JSON_TYPE,
        body,
        cancel: new Cancel(),
      });
      const type = header(up.headers, "content-type") ?? "application/json";
      const whole = up.body.whole;
      if (whole) {
        const h = enc.encode(
          `HTTP/1.1 ${up.status} OK\r\ncontent-type: ${type}\r\ncontent-length: ${whole.length}\r\n\r\n`,
        );
        const out = new Uint8Array(h.length + whole.length);
        out.set(h);
        out.set(whole, h.length);
        await writeAll(conn, out);
        continue;
      }
      await writeAll(
        conn,
        enc.encode(
          `HTTP/1.1 ${up.status} OK\r\ncontent-type: ${type}\r\ntransfer-encoding: chunked\r\n\r\n`,
        ),
      );
      for (let b = await up.body.read(); b !== null; b = await up.body.read()) {
        await writeAll(conn, chunk(b));
      }
      await writeAll(conn, enc.encode("0\r\n\r\n"));
    }
  } catch {
    /* the client or the worker went away */
  } finally {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--port");
  const port = Number(Deno.args[i + 1]);
  const workers = Deno.args.filter((a) => a.startsWith("http://"));
  if (i < 0 || !Number.isInteger(port) || workers.length === 0) {
    console.error("usage: raw_floor_proxy.ts --port P WORKER_URL...");
    Deno.exit(2);
  }
  const client = new Http1Client({ idleTimeoutMs: 90_000, clock: systemClock });
  let n = 0;
  for await (const conn of Deno.listen({ hostname: "127.0.0.1", port })) {
    serveConn(conn, client, workers, () => n++);
  }
}
