/**
 * Tenant rate limits across routers: one tenant (header `x-smg-tenant-id: bench`, trusted)
 * limited to `--rpm` requests per minute (its token limit out of reach), driven through HAProxy
 * (`balance roundrobin`) in front of N gateways on a mesh, each with the same limits file, with
 * `--tenant-rate-limit-scope router` (each router counts alone, as SMG) and `cluster` (the
 * routers share their counts). One run per N and scope, on fresh routers (every bucket full):
 *
 * 1. the burst: `--load` × a bucket's capacity (a minute's worth) sent at once, 64 at a time;
 * 2. the steady part: `--load` × the configured rate, open loop, for `--steady` seconds.
 *
 * Reported: the burst's admitted requests ÷ the capacity (the overshoot after an idle spell);
 * the admitted rate over the last `--tail` seconds of the steady part ÷ the configured rate (the
 * goal: within 10 % in cluster scope at every N; per-router scope about min(N, load)×); and the
 * whole run's admitted ÷ (capacity + rate × its length). Requests are counted by the client
 * (200 admitted, 429 denied, anything else an error). Routers, HAProxy and the client run on
 * CPU 0, the instant worker on CPU 1; every child is stopped at the end, on error and on SIGINT.
 * Traffic goes to 127.0.0.1 only.
 *
 *   deno task bench:limits [--routers 1,3,5] [--scopes router,cluster] [--rpm 1200] [--load 3]
 *                          [--steady 60] [--tail 30] [--sync-ms 100] [--json out.json]
 */

import { parseArgs } from "node:util";
import { type Child, HOST, killAll, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { haproxyConfig, startRouters } from "../mesh/routers.ts";
import { limitsYaml, startInstantWorker, TENANT, TENANT_HEADER, TINY_CHAT } from "./tenant.ts";
import { taskArgs } from "../task_args.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CPU = 0;
/** Requests in flight at most (the burst's concurrency, and a guard for the open loop). */
const BURST_CONCURRENCY = 64;
const MAX_IN_FLIGHT = 512;

type Scope = "router" | "cluster";

interface Options {
  routers: number[];
  scopes: Scope[];
  rpm: number;
  load: number;
  steady: number;
  tail: number;
  syncMs: number;
  json: string | null;
}

function options(args: string[]): Options {
  const { values: v } = parseArgs({
    args,
    options: {
      routers: { type: "string", default: "1,3,5" },
      scopes: { type: "string", default: "router,cluster" },
      rpm: { type: "string", default: "1200" },
      load: { type: "string", default: "3" },
      steady: { type: "string", default: "60" },
      tail: { type: "string", default: "30" },
      "sync-ms": { type: "string", default: "100" },
      json: { type: "string" },
    },
  });
  const scopes = v.scopes.split(",").map((s) => s.trim());
  if (!scopes.every((s) => s === "router" || s === "cluster")) {
    throw new Error("--scopes: router and/or cluster");
  }
  const o: Options = {
    routers: v.routers.split(",").map(Number),
    scopes: scopes as Scope[],
    rpm: Number(v.rpm),
    load: Number(v.load),
    steady: Number(v.steady),
    tail: Number(v.tail),
    syncMs: Number(v["sync-ms"]),
    json: v.json ?? null,
  };
  if (!(o.tail > 0 && o.tail <= o.steady)) throw new Error("--tail: above 0, at most --steady");
  if (!o.routers.every((n) => Number.isInteger(n) && n >= 1)) throw new Error("--routers: N,…");
  return o;
}

/** One request's outcome: when it was sent (ms from the run's start) and its status (0: error). */
interface Sent {
  atMs: number;
  status: number;
}

async function send(url: string, t0: number): Promise<Sent> {
  const atMs = performance.now() - t0;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", [TENANT_HEADER]: TENANT },
      body: TINY_CHAT,
      signal: AbortSignal.timeout(10_000),
    });
    await res.body?.cancel();
    return { atMs, status: res.status };
  } catch {
    return { atMs, status: 0 };
  }
}

/** `n` requests, `BURST_CONCURRENCY` at a time. */
async function burst(url: string, n: number, t0: number): Promise<Sent[]> {
  const out: Sent[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: BURST_CONCURRENCY }, async () => {
      while (next < n) {
        next++;
        out.push(await send(url, t0));
      }
    }),
  );
  return out;
}

/** `rate` requests a second for `secs` seconds, open loop (sent on schedule, not on answers). */
async function steady(url: string, rate: number, secs: number, t0: number): Promise<Sent[]> {
  const out: Promise<Sent>[] = [];
  const start = performance.now();
  const total = Math.round(rate * secs);
  let inFlight = 0;
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (inFlight >= MAX_IN_FLIGHT) {
      out.push(Promise.resolve({ atMs: performance.now() - t0, status: -1 }));
      continue;
    }
    inFlight++;
    out.push(send(url, t0).finally(() => inFlight--));
  }
  return await Promise.all(out);
}

const count = (s: Sent[], status: number) => s.filter((x) => x.status === status).length;

/** One N and scope: fresh routers, the burst, then the steady part. */
async function runOne(n: number, scope: Scope, worker: string, o: Options, dir: string) {
  const children: Child[] = [];
  try {
    const limits = `${dir}/limits.yaml`;
    await Deno.writeTextFile(limits, limitsYaml(o.rpm));
    const routers = await startRouters({
      n,
      mesh: true,
      workers: [worker],
      flags: [
        "--policy",
        "round_robin",
        "--tenant-rate-limit-enabled",
        "--tenant-rate-limit-config",
        limits,
        "--tenant-rate-limit-scope",
        scope,
        "--tenant-rate-limit-sync-ms",
        String(o.syncMs),
        "--trust-tenant-header",
      ],
      tag: `${scope}-n${n}`,
      seed: 1,
      cpu: CPU,
      dir,
      root: ROOT,
      denoFlags: [`--allow-read=${dir}`],
    });
    children.push(...routers.map((r) => r.child));
    const [port] = freePorts(1);
    const cfg = `${dir}/haproxy-${scope}-${n}.cfg`;
    await Deno.writeTextFile(cfg, haproxyConfig(port, routers, false));
    const haproxy = await spawn(
      `haproxy-${scope}-${n}`,
      CPU,
      ["haproxy", "-db", "-f", cfg],
      dir,
      ROOT,
    );
    children.push(haproxy);
    const url = `http://${HOST}:${port}`;
    await waitFor("haproxy", haproxy, `${url}/health`, (s) => s === 200);

    const rate = o.rpm / 60;
    const t0 = performance.now();
    const b = await burst(url, Math.round(o.load * o.rpm), t0);
    const burstMs = performance.now() - t0;
    const s = await steady(url, o.load * rate, o.steady, t0);
    const endMs = performance.now() - t0;
    const tailFrom = burstMs + (o.steady - o.tail) * 1000;
    const tail = s.filter((x) => x.atMs >= tailFrom);
    const all = [...b, ...s];
    return {
      routers: n,
      scope,
      burst: {
        sent: b.length,
        admitted: count(b, 200),
        ms: Math.round(burstMs),
        ofCapacity: count(b, 200) / o.rpm,
      },
      tail: {
        sent: tail.length,
        admitted: count(tail, 200),
        ofRate: count(tail, 200) / (rate * o.tail),
      },
      whole: {
        sent: all.length,
        admitted: count(all, 200),
        ofAllowance: count(all, 200) / (o.rpm + rate * (endMs / 1000)),
      },
      denied: count(all, 429),
      errors: all.length - count(all, 200) - count(all, 429),
      otherStatuses: [...new Set(all.map((x) => x.status))].filter((x) => x !== 200 && x !== 429),
    };
  } finally {
    await stop(children);
  }
}

type Row = Awaited<ReturnType<typeof runOne>>;

function table(rows: Row[]): string {
  const x = (v: number) => `${v.toFixed(2)}×`;
  const out = [
    "| routers | scope | burst: admitted / sent (÷ capacity) | last T s: admitted / sent (÷ rate) | whole run: admitted ÷ allowance | errors |",
    "|---:|---|---|---|---|---:|",
  ];
  for (const r of rows) {
    out.push(
      `| ${r.routers} | ${r.scope} | ${r.burst.admitted} / ${r.burst.sent} in ${r.burst.ms} ms (${
        x(r.burst.ofCapacity)
      }) | ${r.tail.admitted} / ${r.tail.sent} (${x(r.tail.ofRate)}) | ${
        x(r.whole.ofAllowance)
      } | ${r.errors} |`,
    );
  }
  return out.join("\n");
}

const shutdown = new AbortController();

async function main(): Promise<number> {
  const o = options(taskArgs());
  const dir = await Deno.makeTempDir({ prefix: "smg-limits-" });
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      shutdown.abort();
      killAll().finally(() => Deno.exit(130));
    });
  }
  const rows: Row[] = [];
  try {
    const worker = (await startInstantWorker(dir, ROOT)).url;
    for (const n of o.routers) {
      for (const scope of o.scopes) {
        console.error(`bench:limits: ${n} router(s), scope ${scope} (logs in ${dir})`);
        const row = await runOne(n, scope, worker, o, dir);
        console.error(`  ${JSON.stringify(row)}`);
        rows.push(row);
      }
    }
  } finally {
    await killAll();
  }
  console.log(
    `tenant limited to ${o.rpm} requests/min (${o.rpm / 60}/s, capacity ${o.rpm}), driven at ` +
      `${o.load}×; routers behind HAProxy roundrobin, mesh on, sync every ${o.syncMs} ms; ` +
      `steady ${o.steady} s, last ${o.tail} s measured\n`,
  );
  console.log(table(rows));
  if (o.json) await Deno.writeTextFile(o.json, JSON.stringify({ options: o, rows }, null, 2));
  return 0;
}

if (import.meta.main) Deno.exit(await main());
