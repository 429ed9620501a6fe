/**
 * An OpenAI-compatible worker that fails on cue, for the fault matrix (`bench:faults`). It
 * speaks HTTP/1.1 itself on `node:net` (Deno's `node:net` can reset a connection, which neither
 * `Deno.serve` nor `Deno.listen` can), one request at a time per connection, keep-alive.
 *
 *   deno run --allow-net=127.0.0.1 bench/faults/faulty_worker.ts --port P --control-port C \
 *     [--slots 2] [--tokens 8] [--token-ms 30] [--plain-ms 100] [--seed 1]
 *
 * Healthy answers: `GET /health` → `OK`, `GET /v1/models` → `sim-model`;
 * `POST /v1/chat/completions` and `/v1/completions` wait for one of `--slots` (FIFO; a request
 * whose connection closes while waiting leaves the queue) and answer a small JSON after
 * `--plain-ms`, or with `"stream": true` `--tokens` SSE events `--token-ms` apart, a usage event
 * and `data: [DONE]`. A request may override the stream's shape with headers (the gateway passes
 * them on): `x-faulty-tokens`, `x-faulty-token-ms`, `x-faulty-pad` (bytes of padding per event).
 *
 * The fault is chosen on the control port (plain HTTP, `Deno.serve`): `POST /fault` with
 * `{"mode": M, "share": 0..1}` applies mode M to that share of inference requests from then on;
 * `GET /stats` → `{served, open, cancelled, faulted}`. Modes (`faults.ts` writes them):
 *
 * - `hang-head`: reads the request, never answers (until the connection closes);
 * - `hang-mid`: the head and two events (a whole answer: half its body), then nothing;
 * - `garbage`: random bytes instead of a response, or a valid head then broken framing;
 * - `5xx`: 503 or 500 with an error body, alternately;
 * - `reset`: the head and two events (half a body), then a TCP reset;
 * - `no-read`: new connections are accepted and never read, nor are open ones any more (health
 *   probes included), for good: a connection paused stays so after the fault ends (only new
 *   ones are served), as a stuck worker never answers what it took. Each counts as faulted.
 *   (`pause` stops delivery; Node's stream may still pull up to its high-water mark from the
 *   kernel, which for requests this small makes no difference to the gateway.)
 * - `none`: healthy.
 */

import net from "node:net";
import { Buffer } from "node:buffer";
import { parseArgs } from "node:util";
import { seededRandom } from "../../lib/core/clock.ts";
import { FAULT_MODES, type FaultMode } from "./faults.ts";
import { garbageBytes, jsonResponse, plainBody, type Shape, sseEvents } from "./worker_bodies.ts";

/** Knobs from the command line. */
interface WorkerOptions {
  port: number;
  controlPort: number;
  slots: number;
  tokens: number;
  tokenMs: number;
  plainMs: number;
  seed: number;
}

const CRLF2 = Buffer.from("\r\n\r\n");

/** A parsed request. */
interface Req {
  method: string;
  path: string;
  headers: Map<string, string>;
  body: Buffer;
}

/** The worker's state: fault, slots, counters. */
class FaultyWorker {
  mode: FaultMode = "none";
  share = 1;
  served = 0;
  open = 0;
  cancelled = 0;
  faulted = 0;
  #free: number;
  readonly #queue: (() => void)[] = [];
  readonly random: () => number;
  readonly o: WorkerOptions;

  constructor(o: WorkerOptions) {
    this.o = o;
    this.#free = o.slots;
    this.random = seededRandom(o.seed);
  }

  /** Sets the fault. */
  setFault(mode: FaultMode, share: number): void {
    this.mode = mode;
    this.share = share;
  }

  /** Pauses `s` for good. */
  pause(s: net.Socket): void {
    s.pause();
    this.faulted++;
  }

  /** Waits for a slot; false if `gone` fires first (the slot is not taken then). */
  acquire(gone: AbortSignal): Promise<boolean> {
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const grant = () => {
        gone.removeEventListener("abort", leave);
        resolve(true);
      };
      const leave = () => {
        const i = this.#queue.indexOf(grant);
        if (i >= 0) this.#queue.splice(i, 1);
        resolve(false);
      };
      this.#queue.push(grant);
      gone.addEventListener("abort", leave, { once: true });
    });
  }

  release(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#free++;
  }
}

/** Resolves after `ms`, or at once when `signal` fires. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Writes `data`, waiting for the socket to drain when its buffer is full. */
function write(s: net.Socket, data: Uint8Array | string, gone: AbortSignal): Promise<void> {
  if (gone.aborted || s.destroyed) return Promise.resolve();
  if (s.write(data)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      s.off("drain", done);
      gone.removeEventListener("abort", done);
      resolve();
    };
    s.on("drain", done);
    gone.addEventListener("abort", done, { once: true });
  });
}

/** Parses one request from the front of `buf`: the request and the bytes after it, or null. */
function parseRequest(buf: Buffer): { req: Req; rest: Buffer } | null {
  const end = buf.indexOf(CRLF2);
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const [method, path] = lines[0].split(" ");
  const headers = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
  }
  const length = Number(headers.get("content-length") ?? 0);
  if (buf.length < end + 4 + length) return null;
  const body = buf.subarray(end + 4, end + 4 + length);
  return { req: { method, path, headers, body }, rest: buf.subarray(end + 4 + length) };
}

/** Serves one connection's requests in turn. */
function serveConnection(w: FaultyWorker, s: net.Socket): void {
  s.setNoDelay(true);
  const closed = new AbortController();
  s.on("close", () => closed.abort());
  s.on("error", () => {});
  let buf: Buffer = Buffer.alloc(0);
  let busy = false;
  let stuck = false;
  const stick = () => {
    stuck = true;
    w.pause(s);
  };
  const next = async () => {
    while (!busy && !stuck && !closed.signal.aborted) {
      if (w.mode === "no-read") return stick();
      const parsed = parseRequest(buf);
      if (!parsed) return;
      buf = parsed.rest;
      busy = true;
      try {
        await answer(w, s, parsed.req, closed.signal);
      } catch {
        s.destroy();
      }
      busy = false;
    }
  };
  s.on("data", (chunk: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    void next();
  });
  if (w.mode === "no-read") stick();
}

/** The stream's shape: defaults, or the request's `x-faulty-*` headers. */
function shapeOf(w: FaultyWorker, req: Req, chat: boolean, usage: boolean): Shape {
  const h = (name: string, dflt: number) => {
    const v = Number(req.headers.get(name));
    return Number.isFinite(v) && req.headers.has(name) ? v : dflt;
  };
  return {
    chat,
    usage,
    tokens: Math.min(h("x-faulty-tokens", w.o.tokens), 100_000),
    tokenMs: h("x-faulty-token-ms", w.o.tokenMs),
    pad: Math.min(h("x-faulty-pad", 0), 65_536),
  };
}

/** Answers one request, healthily or with the current fault. */
async function answer(w: FaultyWorker, s: net.Socket, req: Req, gone: AbortSignal) {
  if (req.method === "GET") {
    if (req.path === "/health") return void s.write(jsonResponse(200, "OK", "text/plain"));
    if (req.path === "/v1/models") {
      return void s.write(jsonResponse(200, '{"object":"list","data":[{"id":"sim-model"}]}'));
    }
    return void s.write(jsonResponse(404, "{}"));
  }
  const chat = req.path === "/v1/chat/completions";
  if (req.method !== "POST" || (!chat && req.path !== "/v1/completions")) {
    return void s.write(jsonResponse(404, "{}"));
  }
  let body: { stream?: boolean; stream_options?: { include_usage?: boolean } };
  try {
    body = JSON.parse(req.body.toString("utf8"));
  } catch {
    return void s.write(jsonResponse(400, '{"error":{"message":"bad json"}}'));
  }
  const shape = shapeOf(w, req, chat, body.stream_options?.include_usage === true);
  w.open++;
  try {
    const faulted = w.mode !== "none" && w.random() < w.share;
    if (faulted) {
      w.faulted++;
      return await fault(w, s, body.stream === true, shape, gone);
    }
    if (!(await w.acquire(gone))) return void w.cancelled++;
    try {
      if (body.stream === true) await stream(s, shape, gone, Infinity);
      else {
        await sleep(w.o.plainMs, gone);
        if (!gone.aborted) s.write(jsonResponse(200, plainBody(chat)));
      }
      if (gone.aborted) w.cancelled++;
      else w.served++;
    } finally {
      w.release();
    }
  } finally {
    w.open--;
  }
}

const SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache" +
  "\r\ntransfer-encoding: chunked\r\n\r\n";

const chunk = (data: string) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;

/** Streams the head and up to `upTo` events (all of them and the end when Infinity). */
async function stream(s: net.Socket, shape: Shape, gone: AbortSignal, upTo: number) {
  await write(s, SSE_HEAD, gone);
  let sent = 0;
  for (const event of sseEvents(shape)) {
    if (sent === upTo || gone.aborted) return;
    if (shape.tokenMs > 0 && sent < shape.tokens) await sleep(shape.tokenMs, gone);
    await write(s, chunk(event), gone);
    sent++;
  }
  await write(s, "0\r\n\r\n", gone);
}

/** Half of a whole answer: its head (full length) and half its body. */
function halfAnswer(s: net.Socket, chat: boolean): void {
  const full = jsonResponse(200, plainBody(chat));
  s.write(full.subarray(0, full.length - 20));
}

/** Serves `w.mode` instead of an answer. */
async function fault(
  w: FaultyWorker,
  s: net.Socket,
  isStream: boolean,
  shape: Shape,
  gone: AbortSignal,
) {
  const hold = () => sleep(3_600_000, gone);
  switch (w.mode) {
    case "hang-head":
      return await hold();
    case "hang-mid":
    case "reset":
      if (isStream) await stream(s, shape, gone, 2);
      else halfAnswer(s, shape.chat);
      if (w.mode === "reset") return void setTimeout(() => s.resetAndDestroy(), 20);
      return await hold();
    case "garbage":
      if (w.random() < 0.5) s.write(garbageBytes(w.random, 256));
      else if (isStream) {
        await stream(s, shape, gone, 1);
        s.write("zz\r\n\x00\x01garbage\r\n");
      } else s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\x01\x02 not a header\r\n\r\n{}");
      return void setTimeout(() => s.destroy(), 50);
    case "5xx": {
      const status = w.faulted % 2 ? 503 : 500;
      s.write(jsonResponse(status, `{"error":{"message":"fault: ${status}"}}`));
      return;
    }
    default:
      return await hold();
  }
}

function options(args: string[]): WorkerOptions {
  const { values: v } = parseArgs({
    args,
    options: {
      port: { type: "string" },
      "control-port": { type: "string" },
      slots: { type: "string", default: "2" },
      tokens: { type: "string", default: "8" },
      "token-ms": { type: "string", default: "30" },
      "plain-ms": { type: "string", default: "100" },
      seed: { type: "string", default: "1" },
    },
  });
  const n = (name: string, raw: string | undefined, min: number) => {
    const x = Number(raw);
    if (raw === undefined || !Number.isInteger(x) || x < min) {
      throw new Error(`faulty_worker: --${name} needs an integer >= ${min}, got ${raw}`);
    }
    return x;
  };
  return {
    port: n("port", v.port, 1),
    controlPort: n("control-port", v["control-port"], 1),
    slots: n("slots", v.slots, 1),
    tokens: n("tokens", v.tokens, 1),
    tokenMs: n("token-ms", v["token-ms"], 0),
    plainMs: n("plain-ms", v["plain-ms"], 0),
    seed: n("seed", v.seed, 0),
  };
}

/** The control port's handler. */
function control(w: FaultyWorker) {
  return async (req: Request): Promise<Response> => {
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && path === "/fault") {
      const { mode, share = 1 } = await req.json();
      if (!FAULT_MODES.includes(mode) || !(share >= 0 && share <= 1)) {
        return new Response(`bad fault ${JSON.stringify({ mode, share })}`, { status: 400 });
      }
      w.setFault(mode, share);
      return new Response("ok");
    }
    if (path === "/stats") {
      const { served, open, cancelled, faulted } = w;
      return Response.json({ served, open, cancelled, faulted });
    }
    return new Response(null, { status: 404 });
  };
}

if (import.meta.main) {
  const o = options(Deno.args);
  const w = new FaultyWorker(o);
  net.createServer((s) => serveConnection(w, s)).listen(o.port, "127.0.0.1");
  Deno.serve({ hostname: "127.0.0.1", port: o.controlPort, onListen: () => {} }, control(w));
}
