/**
 * `Http1Client` against real servers started by the test: `Deno.serve` (sized and chunked
 * bodies, keep-alive, large bodies both ways, 1,000 concurrent streams), the simulated worker
 * (an SSE completion), and HAProxy and nginx in front of `Deno.serve` — both also with a
 * keep-alive timeout of a few milliseconds, so idle connections close as requests reuse them,
 * which must never fail a request.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { startSimWorker } from "../../lib/sim/worker.ts";
import { Http1Client } from "../../lib/upstream/http1.ts";
import { header, readAll, type UpstreamResponse } from "../../lib/upstream/types.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import { hasCommand, openssl } from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { poll } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * A `Deno.serve` origin: `/sized/N`, `/chunked/N` (N events at once), `/stepped/N` (N events,
 * each after the first sent once the test calls `next()`), `/echo`; reports client ports.
 */
function origin() {
  const ports: number[] = [];
  let permits = 0;
  const waiting: (() => void)[] = [];
  const next = () => {
    const w = waiting.shift();
    if (w) w();
    else permits++;
  };
  const step = () =>
    permits > 0 ? (permits--, Promise.resolve()) : new Promise<void>((r) => waiting.push(r));
  const events = (n: number, stepped: boolean) => {
    let i = 0;
    return new Response(
      new ReadableStream({
        async pull(c) {
          if (stepped && i > 0) await step();
          if (i < n) c.enqueue(enc.encode(`data: ${i++}\n\n`));
          else c.close();
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  };
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req, info) => {
      ports.push(info.remoteAddr.port);
      const path = new URL(req.url).pathname;
      const body = await req.bytes();
      const n = Number(path.split("/")[2] ?? 0);
      if (path.startsWith("/sized/")) return new Response("s".repeat(n));
      if (path === "/echo") return new Response(body);
      if (path.startsWith("/chunked/")) return events(n, false);
      if (path.startsWith("/stepped/")) return events(n, true);
      return new Response("not found", { status: 404 });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    ports,
    next,
    close: () => {
      for (const w of waiting.splice(0)) w();
      return server.shutdown();
    },
  };
}

function send(c: Http1Client, base: string, path: string, body: Uint8Array = enc.encode("{}")) {
  return c.send({
    base,
    path,
    method: "POST",
    headers: [["content-type", "application/json"]],
    body,
    cancel: new Cancel(),
  });
}

async function text(r: UpstreamResponse) {
  return dec.decode(await readAll(r.body));
}

/** Runs the conformance cases against `base` (an origin, or a proxy in front of one). */
async function conformance(c: Http1Client, base: string, label: string, next: () => void) {
  const small = await send(c, base, "/sized/5");
  assert.equal(small.status, 200, label);
  assert.equal(await text(small), "sssss", label);
  const big = await text(await send(c, base, "/sized/300000"));
  assert.equal(big.length, 300_000, `${label}: a body larger than the buffer`);
  const payload = new Uint8Array(1_000_000).map((_, i) => 97 + (i % 26));
  const echo = await readAll((await send(c, base, "/echo", payload)).body);
  assert.deepEqual(echo, payload, `${label}: a 1 MB request body comes back intact`);
  // Each event leaves the origin only once the previous one was read here.
  const stream = await send(c, base, "/stepped/5");
  assert.equal(header(stream.headers, "content-type"), "text/event-stream", label);
  const events: string[] = [];
  for (let b = await stream.body.read(); b !== null; b = await stream.body.read()) {
    events.push(dec.decode(b));
    next();
  }
  assert.equal(events.join(""), [0, 1, 2, 3, 4].map((i) => `data: ${i}\n\n`).join(""), label);
  assert.ok(events.length > 1, `${label}: events arrive as they are sent, not all at the end`);
  assert.equal((await send(c, base, "/missing")).status, 404, label);
}

Deno.test("http1 vs Deno.serve: sized, chunked, large bodies both ways; connections kept alive", async () => {
  const o = origin();
  const c = new Http1Client({ idleTimeoutMs: 3000, clock: systemClock });
  try {
    await conformance(c, o.url, "Deno.serve", o.next);
    // Kept alive, except after the 1 MB echo, which Deno.serve answers with `connection: close`.
    const p = o.ports;
    assert.ok(p[0] === p[1] && p[1] === p[2] && p[3] === p[4] && p[2] !== p[3], `ports ${p}`);
  } finally {
    c.close();
    await o.close();
  }
});

Deno.test("http1 vs Deno.serve: 1,000 concurrent streams complete; the pool keeps at most 500", async () => {
  const o = origin();
  const c = new Http1Client({ idleTimeoutMs: 3000, clock: systemClock });
  try {
    const results = await Promise.all(Array.from({ length: 1000 }, async () => {
      const t = await text(await send(c, o.url, "/chunked/3"));
      return t === "data: 0\n\ndata: 1\n\ndata: 2\n\n";
    }));
    assert.equal(results.filter(Boolean).length, 1000);
    assert.ok(c.idleCount <= 500 && c.idleCount > 0, `idle ${c.idleCount}`);
  } finally {
    c.close();
    await o.close();
  }
});

Deno.test("http1 vs the simulated worker: a streamed completion ends with [DONE]", async () => {
  const o = parseSimWorkerArgs(["--port", "0", "--time-scale", "0"]);
  const w = startSimWorker(o as Exclude<typeof o, "help">);
  const c = new Http1Client({ idleTimeoutMs: 3000, clock: systemClock });
  try {
    const body = { model: "sim-model", prompt: "hello there", max_tokens: 8, stream: true };
    const r = await send(c, w.url, "/v1/completions", enc.encode(JSON.stringify(body)));
    assert.equal(r.status, 200);
    const sse = await text(r);
    const data = sse.split("\n").filter((l) => l.startsWith("data: "));
    assert.equal(data[data.length - 1], "data: [DONE]");
    assert.ok(data.length >= 2, sse);
    const whole = await send(
      c,
      w.url,
      "/v1/completions",
      enc.encode(JSON.stringify({ ...body, stream: false })),
    );
    assert.equal(JSON.parse(await text(whole)).object, "text_completion");
  } finally {
    c.close();
    await w.close();
  }
});

/** Starts `cmd` and waits until `port` accepts connections; stop() kills it by PID. */
async function daemon(cmd: string, args: string[], port: number) {
  const proc = new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).spawn();
  const err = proc.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "";
  const drain = (async () => {
    for (let r = await err.read(); !r.done; r = await err.read()) log += r.value;
  })();
  const stop = async () => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone */ }
    await proc.status;
    await drain;
  };
  try {
    // Another process: nothing but its port says when it listens.
    await poll(
      async () => {
        (await Deno.connect({ hostname: "127.0.0.1", port })).close();
        return true;
      },
      `${cmd} listening on ${port}`,
      5000,
      10,
    );
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}: ${log}`);
  }
  return { stop };
}

function haproxyCfg(port: number, origin: string, keepAliveMs: number) {
  return `global
  nbthread 1
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive ${keepAliveMs}ms
  option http-no-delay
frontend fe
  bind 127.0.0.1:${port}
  default_backend be
backend be
  server o ${origin.replace("http://", "")}
`;
}

function nginxCfg(dir: string, port: number, origin: string, keepAliveMs: number) {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 10m;
  keepalive_timeout ${keepAliveMs}ms;
  upstream o { server ${origin.replace("http://", "")}; keepalive 16; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://o;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`;
}

/** Conformance through a proxy, then 300 requests with gaps around its keep-alive timeout. */
async function throughProxy(kind: "haproxy" | "nginx") {
  const o = origin();
  const dir = await Deno.makeTempDir({ prefix: `smg-http1-${kind}-` });
  const resends = { n: 0 };
  const c = new Http1Client({
    idleTimeoutMs: 3000,
    onResend: () => resends.n++,
    clock: systemClock,
  });
  const started: { stop: () => Promise<void> }[] = [];
  try {
    for (const keepAliveMs of [30_000, 3]) {
      const port = freePort();
      const cfg = `${dir}/${kind}-${keepAliveMs}.cfg`;
      if (kind === "haproxy") {
        await Deno.writeTextFile(cfg, haproxyCfg(port, o.url, keepAliveMs));
        started.push(await daemon("haproxy", ["-db", "-f", cfg], port));
      } else {
        await Deno.writeTextFile(cfg, nginxCfg(dir, port, o.url, keepAliveMs));
        started.push(await daemon("nginx", ["-c", cfg, "-e", `${dir}/error.log`], port));
      }
      const base = `http://127.0.0.1:${port}`;
      if (keepAliveMs > 1000) {
        await conformance(c, base, kind, o.next);
        continue;
      }
      // The proxy closes idle client connections after 3 ms: gaps of 0-6 ms put requests on
      // connections that are closing, closed, or fine. Every request must succeed. A fixed
      // wait on purpose: the gaps are the stimulus, timed against another process's timer.
      for (let i = 0; i < 300; i++) {
        assert.equal(await text(await send(c, base, "/sized/2")), "ss", `${kind} request ${i}`);
        await new Promise((r) => setTimeout(r, i % 7));
      }
    }
  } finally {
    c.close();
    for (const s of started) await s.stop();
    await o.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  return resends.n;
}

Deno.test({
  name:
    "http1 via HAProxy: conformance, and idle connections closing under reuse never fail a request",
  ignore: !hasCommand("haproxy", ["-v"]),
  fn: async () => {
    await throughProxy("haproxy");
  },
});

Deno.test({
  name:
    "http1 via nginx: conformance, and idle connections closing under reuse never fail a request",
  ignore: !hasCommand("nginx", ["-v"]),
  fn: async () => {
    await throughProxy("nginx");
  },
});

/** A throwaway CA and a certificate it signed for 127.0.0.1, made with openssl. */
async function certs(): Promise<{ ca: string; cert: string; key: string }> {
  const dir = await Deno.makeTempDir({ prefix: "smg-http1-tls-" });
  const run = (...args: string[]) => openssl(dir, ...args);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  try {
    await run(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "1",
      "-subj",
      "/CN=test-ca",
    );
    await run("req", ...ec, "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1");
    await Deno.writeTextFile(
      `${dir}/leaf.ext`,
      "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    );
    await run(
      "x509",
      "-req",
      "-in",
      "leaf.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "cert.pem",
      "-days",
      "1",
      "-extfile",
      "leaf.ext",
    );
    const read = (f: string) => Deno.readTextFile(`${dir}/${f}`);
    return { ca: await read("ca.pem"), cert: await read("cert.pem"), key: await read("key.pem") };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "http1 over TLS: an https:// worker is reached with Deno.connectTls; an untrusted certificate fails the request",
  ignore: !hasCommand("openssl", ["version"]),
  fn: async () => {
    const { ca, cert, key } = await certs();
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert, key, onListen: () => {} },
      async (req) => new Response(`tls ${(await req.text()).length}`),
    );
    const base = `https://127.0.0.1:${server.addr.port}`;
    const trusting = new Http1Client({
      idleTimeoutMs: 3000,
      tls: () => ({ caCerts: [ca], client: null }),
      clock: systemClock,
    });
    const plain = new Http1Client({ idleTimeoutMs: 3000, clock: systemClock });
    try {
      assert.equal(await text(await send(trusting, base, "/x")), "tls 2");
      assert.equal(await text(await send(trusting, base, "/x")), "tls 2", "kept alive over TLS");
      await assert.rejects(send(plain, base, "/x"), (e: Error) => {
        assert.match(e.message, /connect to 127\.0\.0\.1:\d+ failed: invalid peer certificate/);
        return true;
      });
    } finally {
      trusting.close();
      plain.close();
      await server.shutdown();
    }
  },
});
