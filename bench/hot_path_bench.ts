/**
 * The gateway's own per-request work, without sockets: `Gateway.handle` on a tiny completion
 * request against an in-process upstream that answers at once, next to the same request
 * through a bare handler (body read, JSON parse, upstream call, `Response`) — the difference is
 * the gateway's logic (routing, ids, admission, deadlines, metrics, headers, breaker). A third
 * case is the own front's path without sockets: the request head parsed from bytes into a
 * `FrontInbound`, `Gateway.entry`, the `Reply` not written; and that path with tenant limits on
 * (`--tenant-rate-limit-enabled`, limits out of reach), and with tracing on (`--enable-trace`,
 * every request or 10 % sampled, the batches encoded and dropped: tracing's cost without a
 * network).
 *
 *   deno bench --unstable-no-legacy-abort --allow-read=/tmp --allow-write=/tmp bench/hot_path_bench.ts
 *
 * `hot_path_loop.ts` runs the same requests in timed batches (best and median batch), steadier
 * than these means on a noisy machine.
 */

import { parseGatewayArgs } from "../lib/config/cli.ts";
import { silentLogger } from "../lib/core/log.ts";
import { type BodySource, FrontInbound, parseRequestHead } from "../lib/front/request.ts";
import { Gateway } from "../lib/server/app.ts";
import { headEnd } from "../lib/http1/head.ts";
import {
  type Upstream,
  type UpstreamBody,
  type UpstreamRequest,
  type UpstreamResponse,
} from "../lib/upstream/types.ts";
import { Cancel } from "../lib/core/cancel.ts";
import { tracingSettings } from "../lib/tracing/settings.ts";
import type { Transport } from "../lib/tracing/export.ts";

const enc = new TextEncoder();
const ANSWER = enc.encode(
  '{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"ok"}]}',
);
const BODY = '{"model":"sim-model","prompt":"hi","max_tokens":1}';

class Whole implements UpstreamBody {
  readonly whole = ANSWER;
  read() {
    return Promise.resolve(null);
  }
  cancel() {}
}

/** An upstream that answers every request at once with a small JSON body. */
class InstantUpstream implements Upstream {
  send(_req: UpstreamRequest): Promise<UpstreamResponse> {
    return Promise.resolve({
      status: 200,
      headers: [["content-type", "application/json"], ["content-length", "80"]],
      body: new Whole(),
    });
  }
  close() {}
}

/** A collector that takes every batch and drops it (tracing's own cost, no network). */
const dropBatches: Transport = { target: "drop", send: () => Promise.resolve(), close() {} };

/**
 * A gateway over two ready workers answered by `InstantUpstream`, with extra `flags`; with
 * `--enable-trace`, sampling `ratio` of the requests, its batches dropped.
 */
function gateway(flags: string[] = [], ratio = 1): Gateway {
  const config = parseGatewayArgs([
    "--worker-urls",
    "http://127.0.0.1:1",
    "http://127.0.0.1:2",
    "--policy",
    "round_robin",
    ...flags,
  ]);
  const env: Record<string, string> = {
    OTEL_TRACES_SAMPLER: "traceidratio",
    OTEL_TRACES_SAMPLER_ARG: String(ratio),
  };
  const settings = tracingSettings(config.tracing, (k) => env[k]);
  const g = new Gateway({
    config,
    log: silentLogger,
    upstream: new InstantUpstream(),
    tracing: settings && { settings, transport: dropBatches },
  });
  for (const url of ["http://127.0.0.1:1", "http://127.0.0.1:2"]) {
    g.manager.add({ url, models: ["sim-model"] }).setStatus("ready");
  }
  return g;
}

const gw = gateway();

/** Tenant limits out of reach (every request admitted): the cost of reserving and settling. */
const LIMITS = `default_policy:
  tokens_per_minute: 1000000000
  requests_per_minute: 1000000000
`;
const limitsFile = await Deno.makeTempFile({ prefix: "smg-hot-limits-", suffix: ".yaml" });
await Deno.writeTextFile(limitsFile, LIMITS);
const gwLimited = gateway([
  "--tenant-rate-limit-enabled",
  "--tenant-rate-limit-config",
  limitsFile,
  "--trust-tenant-header",
]);
await Deno.remove(limitsFile);
const gwTraced = gateway(["--enable-trace"]);
const gwTraced10 = gateway(["--enable-trace"], 0.1);

function request(): Request {
  return new Request("http://gw/v1/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "content-length": String(BODY.length),
      "user-agent": "bench",
    },
    body: BODY,
  });
}

const upstream = new InstantUpstream();
async function bare(req: Request): Promise<Response> {
  const bytes = await req.bytes();
  JSON.parse(new TextDecoder().decode(bytes));
  const up = await upstream.send({
    base: "http://127.0.0.1:1",
    path: "/v1/completions",
    method: "POST",
    headers: [["content-type", "application/json"]],
    body: bytes,
    cancel: new Cancel(),
  });
  return new Response(up.body.whole, { status: up.status, headers: up.headers });
}

Deno.bench(
  "request construction only (subtract from both)",
  { group: "hot", baseline: true },
  () => {
    request();
  },
);

Deno.bench("bare handler", { group: "hot" }, async () => {
  const res = await bare(request());
  await res.bytes();
});

/** One tiny request through `Gateway.handle` (`Deno.serve`'s types). */
export async function handleOnce(): Promise<void> {
  const done = Promise.withResolvers<void>();
  const res = await gw.handle(request(), done.promise);
  await res.bytes();
  done.resolve();
}

Deno.bench("Gateway.handle (round_robin)", { group: "hot" }, handleOnce);

const WIRE = enc.encode(
  "POST /v1/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n" +
    `content-length: ${BODY.length}\r\nuser-agent: bench\r\nx-smg-tenant-id: bench\r\n\r\n${BODY}`,
);

/** A connection whose buffer holds one whole request. */
class MemorySource implements BodySource {
  buf = WIRE;
  start = 0;
  end = WIRE.length;
  readonly authority = "gw";
  readonly maxBody = 1 << 20;
  fill() {
    return Promise.resolve(false);
  }
  write() {
    return Promise.resolve();
  }
  bodyDone() {}
}

/**
 * One tiny request through `Gateway.entry` on a head parsed from bytes (the own front's path),
 * of `g` (default: no tenant limits).
 */
export async function entryOnce(g: Gateway = gw): Promise<void> {
  const src = new MemorySource();
  const he = headEnd(WIRE, 0, WIRE.length);
  const head = parseRequestHead(WIRE, 0, he);
  src.start = he;
  const done = Promise.withResolvers<void>();
  await g.entry(new FrontInbound(head, src), done.promise);
  done.resolve();
}

Deno.bench(
  "Gateway.entry on a parsed head (own front, no sockets)",
  { group: "hot" },
  () => entryOnce(),
);

Deno.bench(
  "Gateway.entry with tenant limits (every request admitted)",
  { group: "hot" },
  () => entryOnce(gwLimited),
);

Deno.bench(
  "Gateway.entry traced, every request (--enable-trace, batches dropped)",
  { group: "hot" },
  () => entryOnce(gwTraced),
);

Deno.bench(
  "Gateway.entry traced, 10 % sampled",
  { group: "hot" },
  () => entryOnce(gwTraced10),
);

/** `entryOnce` through the gateway with tenant limits on. */
export const entryLimitedOnce = (): Promise<void> => entryOnce(gwLimited);

/** `entryOnce` through the gateway tracing every request, or 10 % of them. */
export const entryTracedOnce = (): Promise<void> => entryOnce(gwTraced);
export const entryTraced10Once = (): Promise<void> => entryOnce(gwTraced10);
