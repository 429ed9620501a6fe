/**
 * Router failover benchmark: HAProxy (`balance roundrobin`, health checks every 500 ms, retries
 * with redispatch on connection failures) in front of three gateways running `cache_aware`, all
 * fronting one simulated fleet; the routing benchmark's multi-turn chat workload (open loop);
 * halfway through the measured window one router is SIGKILLed. Run twice: with the mesh off
 * (each router keeps its own trees: the baseline) and on (the routers share trees, workers and
 * pins). Because HAProxy spreads each conversation's turns over the routers, the mesh matters
 * before the kill too.
 *
 *   deno task bench:mesh-failover [--rate 5] [--duration 40] [--warmup 6] [--workers 4]
 *                                 [--modes off,on] [--json out.json]
 *
 * Reported per mode: requests before and after the kill and how many failed (a request that
 * starts after the kill must not fail; those in flight on the killed router may), the fleet's
 * cache-hit rate Σcached/Σprompt from the workers' own counters in each half, client TTFT p50/p99
 * in each half; from the routers' own metrics over the first half: mesh tree-delta bytes per
 * routed request per peer, and the routers' CPU ms per routed request (from /proc). Routers,
 * HAProxy and this client run on CPU 0, the fleet on CPU 1; every child is stopped at the end,
 * on error and on SIGINT too. Traffic goes to 127.0.0.1 only.
 */

import { parseArgs } from "node:util";
import { type Child, HOST, killAll, run, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { drive, type RequestRecord } from "../routing/client.ts";
import { sessionOffer } from "../routing/sessions.ts";
import { delta, readCounters, startFleet, type WorkerCounters } from "../routing/fleet.ts";
import { SIM_KNOBS } from "../routing/scenarios.ts";
import { percentile } from "../routing/report.ts";
import { streamChat } from "../routing/stream.ts";
import { Workload } from "../routing/workload.ts";
import { haproxyConfig, type Router, startRouters } from "./routers.ts";
import { taskArgs } from "../task_args.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CPU = 0;
const ROUTERS = 3;

interface Options {
  rate: number;
  duration: number;
  warmup: number;
  workers: number;
  modes: ("off" | "on")[];
  seed: number;
  json: string | null;
}

function options(args: string[]): Options {
  const { values: v } = parseArgs({
    args,
    options: {
      rate: { type: "string", default: "5" },
      duration: { type: "string", default: "40" },
      warmup: { type: "string", default: "6" },
      workers: { type: "string", default: "4" },
      modes: { type: "string", default: "off,on" },
      seed: { type: "string", default: "1" },
      json: { type: "string" },
    },
  });
  const modes = v.modes.split(",").map((m) => m.trim());
  if (!modes.every((m) => m === "off" || m === "on")) throw new Error("--modes: off and/or on");
  return {
    rate: Number(v.rate),
    duration: Number(v.duration),
    warmup: Number(v.warmup),
    workers: Number(v.workers),
    modes: modes as ("off" | "on")[],
    seed: Number(v.seed),
    json: v.json ?? null,
  };
}

/** Sum of every series of `name` (whose line contains `filter`) in Prometheus text. */
export function metricSum(text: string, name: string, filter = ""): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== "{" && line[name.length] !== " ")) {
      continue;
    }
    if (filter && !line.includes(filter)) continue;
    const v = Number(line.trim().split(/\s+/).at(-1));
    if (Number.isFinite(v)) sum += v;
  }
  return sum;
}

/** One router's counters that matter here. */
interface RouterSample {
  routed: number;
  deltaBytes: number;
  cpuMs: number;
}

async function sampleRouter(r: Router): Promise<RouterSample> {
  const text = await (await fetch(`http://${HOST}:${r.promPort}/metrics`)).text();
  // Deno refuses to read /proc/<pid> without --allow-all; cat may.
  const stat = await run("cat", [`/proc/${r.child.proc.pid}/stat`]);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
  return {
    routed: metricSum(text, "smg_router_requests_total"),
    deltaBytes: metricSum(text, "router_mesh_tree_bytes_sent_total", 'type="deltas"'),
    cpuMs: ticks * 10,
  };
}

const hitRate = (w: WorkerCounters[]) => {
  const prompt = w.reduce((a, x) => a + x.promptTokens, 0);
  return prompt > 0 ? w.reduce((a, x) => a + x.cachedTokens, 0) / prompt : null;
};

function half(records: RequestRecord[]) {
  const ok = records.filter((r) => r.ok);
  const ttft = ok.map((r) => r.ttftMs).filter((x): x is number => x !== null);
  return {
    sent: records.length,
    failed: records.length - ok.length,
    ttftP50Ms: percentile(ttft, 0.5),
    ttftP99Ms: percentile(ttft, 0.99),
  };
}

async function runMode(mode: "off" | "on", o: Options, dir: string) {
  const workload = new Workload({ seed: o.seed });
  const fleet = await startFleet(o.workers, SIM_KNOBS, `fo-${mode}`, dir, ROOT, shutdown.signal);
  const children: Child[] = [...fleet.children];
  try {
    const routers = await startRouters({
      n: ROUTERS,
      mesh: mode === "on",
      workers: fleet.urls,
      flags: ["--policy", "cache_aware"],
      tag: `mesh-${mode}`,
      seed: o.seed,
      cpu: CPU,
      dir,
      root: ROOT,
    });
    children.push(...routers.map((r) => r.child));
    const [port] = freePorts(1);
    const cfg = `${dir}/haproxy-${mode}.cfg`;
    await Deno.writeTextFile(cfg, haproxyConfig(port, routers, true));
    const haproxy = await spawn(`haproxy-${mode}`, CPU, ["haproxy", "-db", "-f", cfg], dir, ROOT);
    children.push(haproxy);
    const url = `http://${HOST}:${port}`;
    await waitFor("haproxy", haproxy, `${url}/health`, (s) => s === 200);
    const probe = await streamChat({
      baseUrl: url,
      model: "sim-model",
      messages: [{ role: "user", content: "ping" }],
      maxTokens: 2,
      headers: {},
      signal: AbortSignal.timeout(10_000),
    });
    if (!probe.ok) throw new Error(`a first request failed: ${probe.error}`);

    let start: WorkerCounters[] = [];
    let atKill: WorkerCounters[] = [];
    let routersStart: RouterSample[] = [];
    let routersAtKill: RouterSample[] = [];
    let killRelMs = 0;
    let killing: Promise<void> = Promise.resolve();
    const t0 = performance.now();
    const d = await drive(url, sessionOffer(workload, { rate: o.rate }), {
      warmupMs: o.warmup * 1000,
      durationMs: o.duration * 1000,
      maxRequests: null,
      drainMs: 30_000,
      model: "sim-model",
      signal: shutdown.signal,
      onMeasureStart: async () => {
        [start, routersStart] = await Promise.all([
          readCounters(fleet.urls),
          Promise.all(routers.map(sampleRouter)),
        ]);
        killing = new Promise((resolve, reject) =>
          setTimeout(async () => {
            try {
              [atKill, routersAtKill] = await Promise.all([
                readCounters(fleet.urls),
                Promise.all(routers.map(sampleRouter)),
              ]);
              killRelMs = performance.now() - t0;
              routers[ROUTERS - 1].child.proc.kill("SIGKILL");
              resolve();
            } catch (e) {
              reject(e);
            }
          }, o.duration * 500)
        );
      },
    });
    await killing;
    const end = await readCounters(fleet.urls);
    const measured = d.records.filter((r) => r.measured);
    const before = measured.filter((r) => r.sentAtMs < killRelMs);
    const after = measured.filter((r) => r.sentAtMs >= killRelMs);
    const routed = routersAtKill.reduce((a, r, i) => a + r.routed - routersStart[i].routed, 0);
    const bytes = routersAtKill.reduce(
      (a, r, i) => a + r.deltaBytes - routersStart[i].deltaBytes,
      0,
    );
    const cpu = routersAtKill.reduce((a, r, i) => a + r.cpuMs - routersStart[i].cpuMs, 0);
    const inFlightFailed = d.records.filter((r) =>
      !r.ok && r.sentAtMs < killRelMs && r.sentAtMs + r.e2eMs >= killRelMs
    ).length;
    return {
      mode,
      before: { ...half(before), cacheHit: hitRate(start.map((s, i) => delta(s, atKill[i]))) },
      after: { ...half(after), cacheHit: hitRate(atKill.map((s, i) => delta(s, end[i]))) },
      inFlightAtKillFailed: inFlightFailed,
      routedFirstHalf: routed,
      deltaBytesPerRequestPerPeer: routed > 0 ? bytes / routed / (ROUTERS - 1) : null,
      routerCpuMsPerRequest: routed > 0 ? cpu / routed : null,
      errors: [...new Set(after.filter((r) => !r.ok).map((r) => r.error))].slice(0, 3),
    };
  } finally {
    await stop(children);
  }
}

const shutdown = new AbortController();

function table(rows: Awaited<ReturnType<typeof runMode>>[]): string {
  const f = (x: number | null, d = 0) => (x === null ? "–" : x.toFixed(d));
  const pct = (x: number | null) => (x === null ? "–" : `${(x * 100).toFixed(1)} %`);
  const out = [
    "| mesh | sent before / after kill | failed before / after (in flight at kill) | cache hit before → after | TTFT p50 before → after ms | TTFT p99 before → after ms | delta B / request / peer | router CPU ms / request |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    out.push(
      `| ${r.mode} | ${r.before.sent} / ${r.after.sent} | ${r.before.failed} / ${r.after.failed} (${r.inFlightAtKillFailed}) | ${
        pct(r.before.cacheHit)
      } → ${pct(r.after.cacheHit)} | ${f(r.before.ttftP50Ms)} → ${f(r.after.ttftP50Ms)} | ${
        f(r.before.ttftP99Ms)
      } → ${f(r.after.ttftP99Ms)} | ${f(r.deltaBytesPerRequestPerPeer, 1)} | ${
        f(r.routerCpuMsPerRequest, 2)
      } |`,
    );
  }
  return out.join("\n");
}

async function main(): Promise<number> {
  const o = options(taskArgs());
  const dir = await Deno.makeTempDir({ prefix: "smg-failover-" });
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      shutdown.abort();
      killAll().finally(() => Deno.exit(130));
    });
  }
  const rows = [];
  try {
    for (const mode of o.modes) {
      console.error(`bench:mesh-failover: mesh ${mode} (logs in ${dir})`);
      rows.push(await runMode(mode, o, dir));
    }
  } finally {
    await killAll();
  }
  console.log(
    `rate ${o.rate} req/s, ${o.workers} workers, ${ROUTERS} routers behind HAProxy roundrobin, ` +
      `${o.duration} s measured, router r${ROUTERS} SIGKILLed at ${o.duration / 2} s\n`,
  );
  console.log(table(rows));
  for (const r of rows) {
    if (r.errors.length) console.log(`\nmesh ${r.mode} errors: ${r.errors.join("; ")}`);
  }
  if (o.json) await Deno.writeTextFile(o.json, JSON.stringify({ options: o, rows }, null, 2));
  return 0;
}

if (import.meta.main) Deno.exit(await main());
