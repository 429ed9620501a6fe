/**
 * `deno task bench:faults`: the fault matrix. One gateway (CPU 0) in front of faulty workers
 * (`faulty_worker.ts`, CPU 1); per row, the steady load (streams and whole answers mixed, open
 * loop, bounded) with the row's fault injected alongside (`rows.ts`), then three routers behind
 * HAProxy on the same fleet for the mesh rows (`mesh.ts`). Reported per row: requests started,
 * answered 2xx, failed by outcome, hung (nothing complete by the request timeout + margin),
 * retried (the gateway's `smg_worker_retries_total`), what the workers faulted, and after a
 * settle pause the gateway's RSS, open descriptors and `/liveness` latency (`report.ts` checks
 * the goals). Every child is stopped at the end, on error and on SIGINT too; traffic goes to
 * 127.0.0.1 only.
 *
 *   deno task bench:faults [--rows none,hang-head,...] [--rate 20] [--secs 8] [--workers 4]
 *                          [--timeout 6] [--json out.json] [--soak SECS]
 *
 * `--soak SECS` runs `soak.ts` instead: mixed traffic for SECS with faults at random.
 */

import { parseArgs } from "node:util";
import { killAll, stop } from "../../support/processes.ts";
import { FaultyFleet, type WorkerShape } from "./fleet.ts";
import { startGateway } from "./gateway.ts";
import { type MatrixOptions, type RowResult, runRow } from "./matrix.ts";
import { MESH_ROWS, runMeshRows } from "./mesh.ts";
import { markdown } from "./report.ts";
import { ROWS } from "./rows.ts";
import { runSoak } from "./soak.ts";
import { numberFlag } from "./flags.ts";
import { taskArgs } from "../task_args.ts";

const GATEWAY_CPU = 0;
const FLEET_CPU = 1;

interface Options extends MatrixOptions {
  shape: WorkerShape;
  rows: string[];
  json: string | null;
  soak: number;
}

function options(args: string[]): Options {
  const { values: v } = parseArgs({
    args,
    options: {
      rows: { type: "string", default: [...ROWS.map((r) => r.id), ...MESH_ROWS].join(",") },
      rate: { type: "string", default: "20" },
      secs: { type: "string", default: "8" },
      "stream-share": { type: "string", default: "0.5" },
      workers: { type: "string", default: "4" },
      slots: { type: "string", default: "2" },
      tokens: { type: "string", default: "8" },
      "token-ms": { type: "string", default: "30" },
      "plain-ms": { type: "string", default: "100" },
      timeout: { type: "string", default: "6" },
      margin: { type: "string", default: "3" },
      "fault-from": { type: "string", default: "1" },
      "fault-to": { type: "string", default: "5" },
      // Past the gateway's pooled worker connections' idle timeout (3 s, swept every 3 s): what
      // is still open after it is held, not pooled.
      settle: { type: "string", default: "8" },
      "burst-secs": { type: "string", default: "2" },
      soak: { type: "string", default: "0" },
      json: { type: "string" },
    },
  });
  const num = numberFlag;
  const shape: WorkerShape = {
    slots: num("slots", v.slots, 1),
    tokens: num("tokens", v.tokens, 1),
    tokenMs: num("token-ms", v["token-ms"], 0),
    plainMs: num("plain-ms", v["plain-ms"], 0),
  };
  const streamShare = num("stream-share", v["stream-share"], 0);
  const workers = num("workers", v.workers, 2);
  // Mean service time of the mix, and the fleet's slots over it.
  const meanMs = streamShare * shape.tokens * shape.tokenMs + (1 - streamShare) * shape.plainMs;
  const known = new Set<string>([...ROWS.map((r) => r.id), ...MESH_ROWS]);
  const rows = v.rows.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const unknown = rows.filter((r) => !known.has(r));
  if (unknown.length) {
    throw new Error(`--rows: unknown ${unknown.join(", ")} (known: ${[...known].join(", ")})`);
  }
  const o: Options = {
    rate: num("rate", v.rate, 0.1),
    secs: num("secs", v.secs, 1),
    streamShare: Math.min(1, streamShare),
    workers,
    timeoutSecs: num("timeout", v.timeout, 1),
    marginSecs: num("margin", v.margin, 0),
    faultFrom: num("fault-from", v["fault-from"], 0),
    faultTo: num("fault-to", v["fault-to"], 0),
    settleSecs: num("settle", v.settle, 0),
    capacity: (workers * shape.slots * 1000) / Math.max(1, meanMs),
    burstSecs: num("burst-secs", v["burst-secs"], 0.1),
    shape,
    rows,
    json: v.json ?? null,
    soak: num("soak", v.soak, 0),
  };
  if (o.faultTo < o.faultFrom || o.faultTo > o.secs) {
    throw new Error("--fault-from ≤ --fault-to ≤ --secs");
  }
  return o;
}

/** One line about a finished row, for progress on stderr. */
function progress(r: RowResult): string {
  const failed = Object.entries(r.failed).map(([k, n]) => `${k}:${n}`).join(" ");
  return `  ${r.id}: ${r.started} started, ${r.ok} ok, failed [${failed}], ${r.hung} hung, ` +
    `${r.counters.retries} retried, rss ${r.proc.rssMb.toFixed(1)} MB, heap ${
      r.proc.heapMb.toFixed(1)
    } MB, ` +
    `${r.proc.fds} fds, ` +
    `${r.secs.toFixed(0)} s`;
}

async function matrix(o: Options, dir: string, signal: AbortSignal): Promise<string> {
  const fleet = await FaultyFleet.start(o.workers, o.shape, FLEET_CPU, dir);
  const results: RowResult[] = [];
  const bases = new Map<string, RowResult | null>();
  try {
    const rows = ROWS.filter((r) => o.rows.includes(r.id) && !r.gatewayFlags);
    if (rows.length) {
      const gw = await startGateway("smg", fleet.urls, o.timeoutSecs, GATEWAY_CPU, dir);
      try {
        let base: RowResult | null = null;
        for (const row of rows) {
          console.error(`bench:faults: ${row.title}`);
          const r = await runRow(row, fleet, gw, o, signal);
          console.error(progress(r));
          if (row.id === "none") base = r;
          bases.set(r.id, base);
          results.push(r);
        }
      } finally {
        await stop([gw.child]);
      }
    }
    for (const row of ROWS.filter((r) => o.rows.includes(r.id) && r.gatewayFlags)) {
      console.error(`bench:faults: ${row.title} (a gateway of its own)`);
      const gw = await startGateway(`smg-${row.id}`, fleet.urls, o.timeoutSecs, GATEWAY_CPU, dir, {
        extra: row.gatewayFlags,
      });
      try {
        const r = await runRow(row, fleet, gw, o, signal);
        console.error(progress(r));
        results.push(r);
      } finally {
        await stop([gw.child]);
      }
    }
    const mesh = MESH_ROWS.filter((id) => o.rows.includes(id));
    if (mesh.length) {
      for (const r of await runMeshRows(mesh, fleet, o, GATEWAY_CPU, dir, signal)) {
        console.error(progress(r));
        results.push(r);
      }
    }
  } finally {
    await fleet.stop();
  }
  if (o.json) {
    await Deno.writeTextFile(o.json, JSON.stringify({ options: o, rows: results }, null, 2));
  }
  const head = `${o.rate} req/s for ${o.secs} s per row (${o.streamShare * 100}% streams of ` +
    `${o.shape.tokens} events ${o.shape.tokenMs} ms apart, the rest whole answers after ` +
    `${o.shape.plainMs} ms), ${o.workers} workers × ${o.shape.slots} slots (≈ ${
      Math.round(o.capacity)
    } req/s), gateway --policy round_robin --request-timeout-secs ${o.timeoutSecs}, ` +
    `hung = nothing complete after ${
      o.timeoutSecs + o.marginSecs
    } s; faults ${o.faultFrom}-${o.faultTo} s ` +
    `into each row; samples ${o.settleSecs} s after its last request ended`;
  return `${head}\n\n${markdown(results, bases)}`;
}

async function main(): Promise<number> {
  const o = options(taskArgs());
  const dir = await Deno.makeTempDir({ prefix: "smg-faults-" });
  const shutdown = new AbortController();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => {
      shutdown.abort();
      killAll().finally(() => Deno.exit(130));
    });
  }
  console.error(`bench:faults: logs in ${dir}`);
  try {
    const out = o.soak > 0
      ? await runSoak(o, o.shape, o.soak, dir, shutdown.signal)
      : await matrix(o, dir, shutdown.signal);
    console.log(out);
  } finally {
    await killAll();
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main());
