/**
 * What the operator surface costs per request: the same gateway (`round_robin`, one instant
 * worker) started in variants that differ in one thing each, loaded in turn by wrk with the
 * overhead benchmark's tiny request (`POST /v1/chat/completions`, `max_tokens: 1`, keep-alive,
 * header `x-smg-tenant-id: bench` on every request), and its CPU per request compared:
 *
 * - `plain`: the own front, HTTP, the explicit net grant the benchmarks use (main thread);
 * - `limits`: + tenant limits (`--tenant-rate-limit-enabled`, the header trusted, limits out of
 *   reach so every request is admitted: the cost of reserving and settling);
 * - `limits-cluster`: + a one-router mesh with `--tenant-rate-limit-scope cluster` (the shares
 *   published every 100 ms);
 * - `mesh`: the one-router mesh alone, the baseline of `limits-cluster`;
 * - `https`: the own front behind TLS (`--tls-cert-path`, a P-256 certificate; wrk keeps its
 *   connections, so this is the record layer, not handshakes);
 * - `deno`, `deno-https`: the same on `--http-server deno`;
 * - `launcher`: started as `deno task start` is (a global `--allow-net`): the command then runs
 *   in a worker thread with a narrowed grant (`lib/commands/launcher.ts`);
 * - `trace-10`, `trace-100`: `--enable-trace` sampling 10 % and every request
 *   (`OTEL_TRACES_SAMPLER=traceidratio`), exported over OTLP/HTTP to a sink on the worker's CPU
 *   (`otlp_sink.ts`, which reads and drops the bodies); `trace-grpc`: every request over OTLP/gRPC
 *   to the same kind of sink; `trace-down`: every request, to a collector port nothing listens on.
 *
 * Each round measures every variant once (a 2 s warm-up, then `--duration` seconds recorded),
 * in an order rotated each round; the report gives each variant's median over the rounds and its
 * ratio to `plain` (or to its own baseline), and the median of its per-round ratios (steadier on
 * a noisy machine: a round's variants run back to back). CPU: the gateway process's utime+stime, all
 * threads. The gateways and wrk run on CPU 0, the worker on CPU 1. Needs wrk and openssl.
 *
 *   deno task bench:cost [--rounds 5] [--duration 5] [--conns 64] [--variants a,b] [--json F]
 */

import { parseArgs } from "node:util";
import { sampleCpu } from "../overhead/cpu.ts";
import { type Child, HOST, killAll, run, spawn, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { wrk } from "../overhead/wrk.ts";
import { gatewayCommand } from "../routing/gateway.ts";
import { makePki } from "../../support/certs.ts";
import { limitsYaml, startInstantWorker, TENANT, TENANT_HEADER, TINY_CHAT } from "./tenant.ts";
import { taskArgs } from "../task_args.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
/** Each variant: its gateway flags, whether it serves https, and what it is compared with. */
interface Variant {
  flags: (ctx: Ctx, meshPort: number) => string[];
  /** Its environment (the tracing variants' OTEL_* variables). */
  env?: (ctx: Ctx) => Record<string, string>;
  https?: boolean;
  /** Started as `deno task start` is (global net grant, launcher thread). */
  launcher?: boolean;
  baseline: string;
}

interface Ctx {
  dir: string;
  pkiDir: string;
  cert: string;
  key: string;
  /** The OTLP sinks' endpoints (HTTP, gRPC), and a port nothing listens on. */
  sink: { http: string; grpc: string; down: string };
}

/** `--enable-trace` toward `endpoint` over `protocol`, sampling `ratio` of the requests. */
const traceVariant = (
  endpoint: (c: Ctx) => string,
  protocol: "http/protobuf" | "grpc",
  ratio: number,
): Variant => ({
  flags: (c) => ["--enable-trace", "--otlp-traces-endpoint", endpoint(c)],
  env: () => ({
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_TRACES_SAMPLER: "traceidratio",
    OTEL_TRACES_SAMPLER_ARG: String(ratio),
  }),
  baseline: "plain",
});

const limitFlags = (c: Ctx) => [
  "--tenant-rate-limit-enabled",
  "--tenant-rate-limit-config",
  `${c.dir}/limits.yaml`,
  "--trust-tenant-header",
];
const meshFlags = (port: number) => [
  "--enable-mesh",
  "--mesh-server-name",
  "r1",
  "--mesh-host",
  HOST,
  "--mesh-port",
  String(port),
];
const tlsFlags = (c: Ctx) => ["--tls-cert-path", c.cert, "--tls-key-path", c.key];
const deno = ["--http-server", "deno"];

const VARIANTS: Record<string, Variant> = {
  plain: { flags: () => [], baseline: "plain" },
  limits: { flags: limitFlags, baseline: "plain" },
  mesh: { flags: (_, p) => meshFlags(p), baseline: "plain" },
  "limits-cluster": {
    flags: (c, p) => [...limitFlags(c), ...meshFlags(p), "--tenant-rate-limit-scope", "cluster"],
    baseline: "mesh",
  },
  https: { flags: tlsFlags, https: true, baseline: "plain" },
  deno: { flags: () => deno, baseline: "plain" },
  "deno-https": { flags: (c) => [...deno, ...tlsFlags(c)], https: true, baseline: "deno" },
  launcher: { flags: () => [], launcher: true, baseline: "plain" },
  "trace-10": traceVariant((c) => c.sink.http, "http/protobuf", 0.1),
  "trace-100": traceVariant((c) => c.sink.http, "http/protobuf", 1),
  "trace-grpc": traceVariant((c) => c.sink.grpc, "grpc", 1),
  "trace-down": traceVariant((c) => c.sink.down, "http/protobuf", 1),
};

interface Options {
  rounds: number;
  duration: number;
  conns: number;
  variants: string[];
  json: string | null;
}

function options(args: string[]): Options {
  const { values: v } = parseArgs({
    args,
    options: {
      rounds: { type: "string", default: "5" },
      duration: { type: "string", default: "5" },
      conns: { type: "string", default: "64" },
      variants: { type: "string", default: Object.keys(VARIANTS).join(",") },
      json: { type: "string" },
    },
  });
  const variants = v.variants.split(",").map((s) => s.trim());
  for (const name of variants) {
    if (!VARIANTS[name]) throw new Error(`--variants: ${name}? (${Object.keys(VARIANTS)})`);
    const base = VARIANTS[name].baseline;
    if (!variants.includes(base)) variants.push(base);
  }
  return {
    rounds: Number(v.rounds),
    duration: Number(v.duration),
    conns: Number(v.conns),
    variants,
    json: v.json ?? null,
  };
}

/** The deno flags of `deno task start` (before `main.ts`), read from deno.json. */
async function startTaskFlags(): Promise<string[]> {
  const tasks = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).tasks;
  const words = (tasks.start as string).split(/\s+/);
  return words.slice(2, words.indexOf("main.ts"));
}

interface Started {
  name: string;
  child: Child;
  url: string;
}

async function startVariant(name: string, worker: string, c: Ctx): Promise<Started> {
  const v = VARIANTS[name];
  const [port, promPort, meshPort] = freePorts(3);
  let cmd = gatewayCommand(ROOT, port, promPort, 1, [
    "--worker-urls",
    worker,
    "--policy",
    "round_robin",
    ...v.flags(c, meshPort),
  ]).toSpliced(2, 0, `--allow-read=${c.dir},${c.pkiDir}`)
    // The yaml package reads LOG_TOKENS and LOG_STREAM.
    .map((a) => (a.startsWith("--allow-env=") ? "--allow-env" : a));
  if (v.launcher) {
    // `deno task start`'s own flags in place of the benchmarks' explicit ones.
    const at = cmd.indexOf(`${ROOT}main.ts`);
    cmd = ["run", ...await startTaskFlags(), ...cmd.slice(at)];
  }
  const child = await spawn(
    `cost-${name}`,
    0,
    [Deno.execPath(), ...cmd],
    c.dir,
    ROOT,
    v.env?.(c),
  );
  const url = `${v.https ? "https" : "http"}://${HOST}:${port}`;
  await waitFor(
    name,
    child,
    `http://${HOST}:${promPort}/metrics`,
    (s) => s === 200,
  );
  return { name, child, url };
}

const SINK = new URL("otlp_sink.ts", import.meta.url).pathname;

/** The OTLP sink on CPU 1 (when a tracing variant runs), and a port nothing listens on. */
async function startSink(dir: string, wanted: boolean): Promise<Ctx["sink"]> {
  const [http, grpc, down] = freePorts(3);
  const sink = { http: `${HOST}:${http}`, grpc: `${HOST}:${grpc}`, down: `${HOST}:${down}` };
  if (!wanted) return sink;
  const child = await spawn(
    "otlp-sink",
    1,
    [
      Deno.execPath(),
      "run",
      `--allow-net=${HOST}`,
      "--allow-env",
      SINK,
      "--port",
      String(http),
      "--grpc-port",
      String(grpc),
    ],
    dir,
    ROOT,
  );
  await waitFor("otlp-sink", child, `http://${sink.http}/health`, (s) => s === 200);
  return sink;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main(): Promise<number> {
  const o = options(taskArgs());
  const dir = await Deno.makeTempDir({ prefix: "smg-cost-" });
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => killAll().finally(() => Deno.exit(130)));
  }
  const clkTck = Number(await run("getconf", ["CLK_TCK"])) || 100;
  const perReq = new Map<string, number[]>(o.variants.map((v) => [v, []]));
  const rps = new Map<string, number[]>(o.variants.map((v) => [v, []]));
  try {
    const pki = await makePki();
    const ctx: Ctx = {
      dir,
      pkiDir: pki.dir,
      cert: pki.server.cert,
      key: pki.server.key,
      sink: await startSink(dir, o.variants.some((v) => v.startsWith("trace-"))),
    };
    await Deno.writeTextFile(`${dir}/limits.yaml`, limitsYaml(null));
    const script = `${dir}/post.lua`;
    await Deno.writeTextFile(
      script,
      `wrk.method = "POST"\nwrk.body = '${TINY_CHAT}'\n` +
        `wrk.headers["Content-Type"] = "application/json"\n` +
        `wrk.headers["${TENANT_HEADER}"] = "${TENANT}"\n`,
    );
    const worker = (await startInstantWorker(dir, ROOT)).url;
    const started: Started[] = [];
    for (const name of o.variants) started.push(await startVariant(name, worker, ctx));
    for (const s of started) {
      const probe = await wrk(s.url + "/v1/chat/completions", 1, 1, script);
      if (probe.non2xx > 0 || probe.requests === 0) {
        throw new Error(`${s.name}: a probe got ${probe.non2xx} non-2xx of ${probe.requests}`);
      }
    }
    for (let r = 0; r < o.rounds; r++) {
      const order = started.map((_, i) => started[(i + r) % started.length]);
      for (const s of order) {
        const url = s.url + "/v1/chat/completions";
        await wrk(url, o.conns, 2, script);
        const before = await sampleCpu(s.child.proc.pid);
        const res = await wrk(url, o.conns, o.duration, script);
        const after = await sampleCpu(s.child.proc.pid);
        if (res.non2xx > 0) throw new Error(`${s.name}: ${res.non2xx} non-2xx answers`);
        const us = ((after.ticks - before.ticks) / clkTck) * 1e6 / res.requests;
        perReq.get(s.name)!.push(us);
        rps.get(s.name)!.push(res.rps);
        console.error(
          `  round ${r + 1} ${s.name}: ${Math.round(res.rps)} req/s, ${us.toFixed(1)} µs/req`,
        );
      }
    }
  } finally {
    await killAll();
  }
  const rows = o.variants.map((name) => {
    const cpu = median(perReq.get(name)!);
    const base = median(perReq.get(VARIANTS[name].baseline)!);
    return {
      name,
      baseline: VARIANTS[name].baseline,
      cpuUsPerReq: cpu,
      reqPerSec: median(rps.get(name)!),
      ratio: cpu / base,
      ratios: perReq.get(name)!.map((x, i) => x / perReq.get(VARIANTS[name].baseline)![i]),
    };
  }).map((r) => ({ ...r, roundRatio: median(r.ratios) }));
  console.log(
    `tiny request, ${o.conns} connections, ${o.rounds} rounds of ${o.duration} s, medians\n`,
  );
  console.log(
    "| variant | req/s | CPU µs / request | ÷ baseline | median round ratio (per-round ratios) |",
  );
  console.log("|---|---:|---:|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${Math.round(r.reqPerSec)} | ${r.cpuUsPerReq.toFixed(1)} | ${
        r.name === r.baseline
          ? "– | –"
          : `${r.ratio.toFixed(3)}× ${r.baseline} | ${r.roundRatio.toFixed(3)}× (${
            r.ratios.map((x) => x.toFixed(2)).join(", ")
          })`
      } |`,
    );
  }
  if (o.json) await Deno.writeTextFile(o.json, JSON.stringify({ options: o, rows }, null, 2));
  return 0;
}

if (import.meta.main) Deno.exit(await main());
