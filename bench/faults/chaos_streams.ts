/**
 * `deno task bench:chaos`: streams that survive their worker. Per run, 4 simulated workers
 * (`smg sim-worker`, CPU 1, each on a fixed port) behind the gateway (CPU 0, round robin); 64
 * streaming chat clients, each request with a prompt of its own, kept open for `--duration`
 * seconds while every `--fault-every` seconds one worker in turn is killed (SIGKILL, started
 * again on its port `--restart-after` seconds later) or frozen (SIGSTOP for twice the idle
 * deadline, then SIGCONT), alternately. Then every stream's request is asked again, straight
 * from a fresh worker (no pace: the engine is greedy, its text does not depend on time), and its
 * text compared byte for byte with what the client got through the gateway. One run per
 * `--migration-limit` (default 3, then 0: what clients see without continuation), each with a
 * fresh fleet and gateway. A markdown table to stdout, everything to a JSON file under /tmp.
 * Every child is stopped by PID at the end, on error and on SIGINT/SIGTERM too (frozen workers
 * thawed first); traffic goes to 127.0.0.1 only.
 *
 *   deno task bench:chaos [--duration 60] [--streams 64] [--max-tokens 300] [--time-scale 1]
 *     [--stream-idle-timeout-secs 5] [--fault-every 10] [--restart-after 3]
 *     [--migration-limit 3,0] [--cb-timeout-duration-secs 5] [--drain 30] [--json FILE]
 */

import { parseArgs } from "node:util";
import { type Child, HOST, killAll, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { gatewayCommand } from "../routing/gateway.ts";
import type { StreamRecord } from "./chaos_client.ts";
import { load, type LoadOptions, references } from "./chaos_load.ts";
import { faultPlan, type FaultRecord, runFaults } from "./chaos_faults.ts";
import {
  groupTable,
  judge,
  markdown,
  type Reference,
  type RunSummary,
  summarize,
  type Verdict,
} from "./chaos_report.ts";
import { SimFleet, type SimShape } from "./chaos_sims.ts";
import { numberFlag } from "./flags.ts";
import { taskArgs } from "../task_args.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const GATEWAY_CPU = 0;
const FLEET_CPU = Math.min(1, navigator.hardwareConcurrency - 1);

interface Options extends LoadOptions {
  idleSecs: number;
  everySecs: number;
  restartSecs: number;
  limits: number[];
  breakerSecs: number;
  json: string | null;
}

function options(args: string[]): Options {
  const { values: v } = parseArgs({
    args,
    options: {
      duration: { type: "string", default: "60" },
      streams: { type: "string", default: "64" },
      workers: { type: "string", default: "4" },
      "max-tokens": { type: "string", default: "300" },
      "time-scale": { type: "string", default: "1" },
      "stream-idle-timeout-secs": { type: "string", default: "5" },
      "fault-every": { type: "string", default: "10" },
      "restart-after": { type: "string", default: "3" },
      "migration-limit": { type: "string", default: "3,0" },
      drain: { type: "string", default: "30" },
      "cb-timeout-duration-secs": { type: "string", default: "5" },
      json: { type: "string" },
    },
  });
  const num = numberFlag;
  return {
    durationSecs: num("duration", v.duration, 1),
    streams: num("streams", v.streams, 1),
    workers: num("workers", v.workers, 2),
    maxTokens: num("max-tokens", v["max-tokens"], 2),
    timeScale: num("time-scale", v["time-scale"], 0),
    idleSecs: num("stream-idle-timeout-secs", v["stream-idle-timeout-secs"], 1),
    everySecs: num("fault-every", v["fault-every"], 1),
    restartSecs: num("restart-after", v["restart-after"], 0),
    limits: v["migration-limit"].split(",").map((s) => num("migration-limit", s.trim(), 0)),
    drainSecs: num("drain", v.drain, 1),
    breakerSecs: num("cb-timeout-duration-secs", v["cb-timeout-duration-secs"], 1),
    json: v.json ?? null,
  };
}

/** Starts the gateway in front of `urls` and waits until it counts them all healthy. */
async function startGateway(
  urls: string[],
  limit: number,
  o: Options,
  dir: string,
): Promise<{ child: Child; url: string; promUrl: string; args: string[] }> {
  const [port, promPort] = freePorts(2);
  const args = gatewayCommand(ROOT, port, promPort, 1, [
    "--worker-urls",
    ...urls,
    "--policy",
    "round_robin",
    "--stream-idle-timeout-secs",
    String(o.idleSecs),
    "--stream-migration-limit",
    String(limit),
    // A faulted worker's breaker opens (its streams all fail at once); with the default 60 s
    // and a fault every 10 s, all four are open from the fourth fault on.
    "--cb-timeout-duration-secs",
    String(o.breakerSecs),
  ]);
  const child = await spawn(
    `smg-limit-${limit}`,
    GATEWAY_CPU,
    [Deno.execPath(), ...args],
    dir,
    ROOT,
  );
  const url = `http://${HOST}:${port}`;
  try {
    await waitFor(
      child.name,
      child,
      `${url}/readiness`,
      (s, b) => s === 200 && JSON.parse(b).healthy_workers === urls.length,
    );
  } catch (e) {
    await stop([child]);
    throw e;
  }
  return { child, url, promUrl: `http://${HOST}:${promPort}`, args };
}

/** The gateway's worker ids mapped to their URLs (`GET /workers`). */
async function workerUrls(gateway: string): Promise<Map<string, string>> {
  const body = await (await fetch(`${gateway}/workers`)).json();
  return new Map(
    (body.workers as { id: string; url: string }[]).map((w) => [w.id, w.url]),
  );
}

/** What one run gives: the summary, and the raw data for the JSON file. */
interface RunResult {
  summary: RunSummary;
  gatewayArgs: string[];
  records: StreamRecord[];
  verdicts: Verdict[];
  refs: Map<number, Reference>;
}

/** One run: a fresh fleet and gateway with `limit`, the load with its faults, the references. */
async function run(
  o: Options,
  limit: number,
  reference: string,
  dir: string,
  signal: AbortSignal,
  fleets: Set<SimFleet>,
): Promise<RunResult> {
  const shape: SimShape = { maxNewTokens: o.maxTokens, timeScale: o.timeScale };
  const names = Array.from({ length: o.workers }, (_, i) => `limit-${limit}-worker-${i}`);
  const fleet = await SimFleet.start(names, shape, FLEET_CPU, dir);
  fleets.add(fleet);
  let records: StreamRecord[];
  let faults: FaultRecord[];
  let metrics: string;
  let ids: Map<string, string>;
  let gatewayArgs: string[];
  try {
    const gw = await startGateway(fleet.urls, limit, o, dir);
    gatewayArgs = gw.args;
    try {
      ids = await workerUrls(gw.url);
      const plan = faultPlan({
        workers: o.workers,
        durationMs: o.durationSecs * 1000,
        everyMs: o.everySecs * 1000,
        restartMs: o.restartSecs * 1000,
        stallMs: 2 * o.idleSecs * 1000,
      });
      const t0 = performance.now();
      const log = (line: string) => console.error(`  ${line}`);
      const faulting = runFaults(plan, fleet, t0, signal, log);
      records = await load(gw.url, o, t0, signal);
      faults = await faulting;
      metrics = await (await fetch(`${gw.promUrl}/metrics`)).text();
    } finally {
      await stop([gw.child]);
    }
  } finally {
    fleets.delete(fleet);
    await fleet.stop();
  }
  console.error(`  asking the 200s of ${records.length} requests again from the reference worker`);
  const refs = await references(reference, records, o, signal);
  const verdicts = judge(records, refs, faults, (id) => ids.get(id));
  const summary = summarize(
    { migrationLimit: limit, idleSecs: o.idleSecs },
    records,
    verdicts,
    faults,
    metrics,
  );
  return { summary, gatewayArgs, records, verdicts, refs };
}

async function main(): Promise<number> {
  const o = options(taskArgs());
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "smg-chaos-" });
  const json = o.json ?? `${dir}/chaos_streams.json`;
  const shutdown = new AbortController();
  const fleets = new Set<SimFleet>();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      shutdown.abort();
      fleets.forEach((f) => f.thawAll());
      killAll().finally(() => Deno.exit(130));
    });
  }
  console.error(`bench:chaos: logs in ${dir}`);
  const results: RunResult[] = [];
  try {
    const shape = { maxNewTokens: o.maxTokens, timeScale: 0 };
    const ref = await SimFleet.start(["reference"], shape, FLEET_CPU, dir);
    fleets.add(ref);
    for (const limit of o.limits) {
      console.error(`bench:chaos: --stream-migration-limit ${limit}`);
      results.push(await run(o, limit, ref.urls[0], dir, shutdown.signal, fleets));
    }
  } finally {
    fleets.forEach((f) => f.thawAll());
    await killAll();
  }
  const summaries = results.map((r) => r.summary);
  await Deno.writeTextFile(
    json,
    JSON.stringify(
      {
        options: o,
        date: new Date().toISOString(),
        runs: results.map((r) => ({
          summary: r.summary,
          gateway: r.gatewayArgs.join(" "),
          streams: r.records.map((s, i) => ({
            ...s,
            ...r.verdicts[i],
            text: undefined,
            textLength: s.text.length,
          })),
          // What failing streams got and should have got, to investigate them.
          failing: r.records.flatMap((s, i) =>
            r.verdicts[i].failures.length === 0
              ? []
              : [{ ...s, ...r.verdicts[i], reference: r.refs.get(s.n)?.text }]
          ),
        })),
      },
      null,
      2,
    ),
  );
  const faults = summaries[0]?.faults.map((f) =>
    `${f.kind} worker ${f.worker} at ${(f.startMs / 1000).toFixed(1)} s (back at ${
      (f.endMs / 1000).toFixed(1)
    } s)`
  ).join("; ");
  console.log(
    `${o.streams} streaming chat clients for ${o.durationSecs} s, ${o.workers} sim workers ` +
      `(--time-scale ${o.timeScale}), max_tokens ${o.maxTokens}, gateway --policy ` +
      `round_robin --stream-idle-timeout-secs ${o.idleSecs} --cb-timeout-duration-secs ` +
      `${o.breakerSecs}; faults every ${o.everySecs} s: ` +
      `${faults}\n\n${
        markdown(summaries)
      }\n\nStreams by how they were broken (times of those without a failure):\n\n${
        groupTable(summaries)
      }\n\nJSON: ${json}`,
  );
  return 0;
}

if (import.meta.main) Deno.exit(await main());
