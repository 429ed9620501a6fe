/**
 * The rows of the fault matrix against one gateway: each injects its fault while the steady load
 * runs, from `faultFrom` to `faultTo` seconds into it. Worker faults hit one worker of the fleet
 * (the 5xx storm: every worker, half of their requests); client faults add misbehaving clients
 * (`bad_clients.ts`) spread over the window; the burst adds 10× the fleet's capacity for
 * `burstSecs`, once with the gateway's admission off (the default) and once on a gateway of its
 * own with admission on (`ADMISSION`). The mesh rows are in `mesh.ts`.
 */

import { type BadOutcome, leaver, slowBody, slowReader } from "./bad_clients.ts";
import type { FaultMode } from "./faults.ts";
import { runLoad } from "./load.ts";
import type { Injected, Row, RowEnv } from "./matrix.ts";
import { HOST } from "../../support/processes.ts";

/** A summary like `ok 10, 504 2` of outcomes. */
export function outcomeList(xs: readonly BadOutcome[]): string {
  const m = new Map<string, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return [...m].map(([k, n]) => `${k} ${n}`).join(", ") || "none";
}

/** Worker `which` (every worker: -1) given `mode` for `share` of its requests in the window. */
function workerFault(id: string, title: string, mode: FaultMode, which = 0, share = 1): Row {
  return {
    id,
    title,
    async inject(env: RowEnv): Promise<Injected> {
      const n = env.o.workers;
      const targets = which < 0 ? [...Array(n).keys()] : [which];
      await env.at(env.o.faultFrom);
      await Promise.all(targets.map((i) => env.fleet.fault(i, mode, share)));
      await env.at(env.o.faultTo);
      await Promise.all(targets.map((i) => env.fleet.fault(i, "none")));
      const who = which < 0 ? `all ${n} workers` : `1 of ${n} workers`;
      return {
        extra: [],
        note: `${who}, ${share * 100}% of requests, ${env.o.faultFrom}-${env.o.faultTo} s`,
      };
    },
  };
}

/** `n` calls of `fn` spread evenly over the fault window; resolves with their results. */
async function spread<T>(env: RowEnv, n: number, fn: () => Promise<T>): Promise<T[]> {
  const span = env.o.faultTo - env.o.faultFrom;
  const all: Promise<T>[] = [];
  for (let i = 0; i < n && !env.signal.aborted; i++) {
    await env.at(env.o.faultFrom + (i * span) / n);
    all.push(fn());
  }
  return await Promise.all(all);
}

function clientOptions(env: RowEnv) {
  return { host: HOST, port: env.gateway.port, deadlineMs: env.deadlineMs };
}

const killRestart: Row = {
  id: "worker-kill",
  title: "worker SIGKILLed, restarts",
  async inject(env) {
    await env.at(env.o.faultFrom);
    await env.fleet.kill(0);
    const t = performance.now();
    await env.at(env.o.faultFrom + 1);
    await env.fleet.restart(0);
    const upMs = performance.now() - t;
    return {
      extra: [],
      note: `1 of ${env.o.workers} workers killed at ${env.o.faultFrom} s, listening again ${
        (upMs / 1000).toFixed(1)
      } s later`,
    };
  },
};

const slowReaders: Row = {
  id: "client-slow-read",
  title: "client reads slowly",
  async inject(env) {
    // 400 events of ~680 B (≈270 KB) sent at once by the worker, read 4 KB every 50 ms.
    const out = await spread(env, 10, () => slowReader(clientOptions(env), 400, 500, 4096, 50));
    return { extra: out, note: `10 slow readers (~270 KB at 80 KB/s): ${outcomeList(out)}` };
  },
};

const leavers: Row = {
  id: "client-leaves",
  title: "client leaves mid-stream",
  async inject(env) {
    const before = await env.fleet.stats();
    const out = await spread(env, 30, () => leaver(clientOptions(env), 2));
    await new Promise((r) => setTimeout(r, 500));
    const after = await env.fleet.stats();
    const cancelled = after.reduce((a, s, i) => a + s.cancelled - before[i].cancelled, 0);
    return {
      extra: out,
      note: `30 clients leave after 2 of 200 events: ${
        outcomeList(out)
      }; workers saw ${cancelled} cancelled`,
    };
  },
};

const slowBodies: Row = {
  id: "client-slow-body",
  title: "client sends its body slowly",
  async inject(env) {
    const out = await spread(env, 20, () => slowBody(clientOptions(env), 10, 300));
    return {
      extra: out,
      note: `20 clients send their body in 10 pieces 300 ms apart: ${outcomeList(out)}`,
    };
  },
};

/** Admission for the burst row that has it: twice the fleet's slots at once, 32 waiting 3 s. */
const ADMISSION = [
  "--max-concurrent-requests",
  "16",
  "--queue-size",
  "32",
  "--queue-timeout-secs",
  "3",
];

/** A burst of 10× the fleet's capacity on top of the steady load. */
const burst = (id: string, title: string, gatewayFlags?: string[]): Row => ({
  id,
  title,
  gatewayFlags,
  async inject(env) {
    await env.at(env.o.faultFrom);
    const rate = Math.round(10 * env.o.capacity);
    const r = await runLoad({
      url: env.gateway.url,
      rate,
      secs: env.o.burstSecs,
      streamShare: env.o.streamShare,
      deadlineMs: env.deadlineMs,
      maxInFlight: 5000,
      signal: env.signal,
    });
    const out = r.records.map((x) => x.outcome);
    return {
      extra: out,
      note: `${out.length} extra at ${rate}/s for ${env.o.burstSecs} s (fleet ≈ ${
        Math.round(env.o.capacity)
      }/s): ${outcomeList(out)}${gatewayFlags ? `; gateway ${gatewayFlags.join(" ")}` : ""}`,
    };
  },
});

/** The single-gateway rows, in order. */
export const ROWS: readonly Row[] = [
  {
    id: "none",
    title: "no fault (baseline)",
    inject: () => Promise.resolve({ extra: [], note: "" }),
  },
  workerFault("hang-head", "worker hangs before its head", "hang-head"),
  workerFault("hang-mid", "worker hangs mid-stream", "hang-mid"),
  workerFault("garbage", "worker sends garbage bytes", "garbage"),
  workerFault("5xx-storm", "5xx storm", "5xx", -1, 0.5),
  workerFault("reset", "worker resets mid-stream", "reset"),
  workerFault("no-read", "worker accepts, never reads", "no-read"),
  killRestart,
  slowReaders,
  leavers,
  slowBodies,
  burst("burst", "burst of 10× the fleet's capacity"),
  {
    id: "none-after",
    title: "no fault (after the rows above)",
    inject: () => Promise.resolve({ extra: [], note: "" }),
  },
  burst("burst-admission", "burst of 10×, admission on", ADMISSION),
];
