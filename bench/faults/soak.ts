/**
 * The soak (`bench:faults --soak SECS`): one gateway in front of the faulty fleet, the steady load
 * for SECS, and every `PERIOD_SECS` one fault of the matrix (`rows.ts`, drawn by a seeded
 * generator) injected for `FAULT_SECS`. Every `SAMPLE_SECS` the gateway's RSS, heap in use,
 * descriptors and `/liveness` latency are sampled; reported are their least-squares slopes per
 * minute after the first `WARMUP_SECS` (a fifth of a shorter soak), the hung requests (the
 * goal: 0), and per fault the requests started in its windows or before the next (the fault's
 * own included) and how they ended: the error budget. Rows that need a gateway of their own
 * (`gatewayFlags`) are left out.
 */

import { seededRandom } from "../../lib/core/clock.ts";
import { stop } from "../../support/processes.ts";
import type { BadOutcome } from "./bad_clients.ts";
import { FaultyFleet, type WorkerShape } from "./fleet.ts";
import { startGateway } from "./gateway.ts";
import { runLoad } from "./load.ts";
import { countOutcomes, loadOptions, type MatrixOptions, type RowEnv, sleep } from "./matrix.ts";
import { lagAfter, procSample } from "./probe.ts";
import { outcomeList, ROWS } from "./rows.ts";

const PERIOD_SECS = 20;
const FAULT_SECS = 5;
const SAMPLE_SECS = 10;
/** Samples before this are left out of the slopes (the heap grows to its working size first). */
const WARMUP_SECS = 60;

/** One sample of the gateway. */
interface Sample {
  atSecs: number;
  rssMb: number;
  heapMb: number;
  fds: number;
  lagP50: number;
}

/** Least-squares slope of `y` over `x`, or 0 with fewer than two points. */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0, den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Resolves at `at` on `performance.now()`, or as soon as `signal` aborts. */
const sleepUntil = (at: number, signal: AbortSignal) => sleep(at - performance.now(), signal);

/** Runs the soak; returns its report (markdown). */
export async function runSoak(
  o: MatrixOptions,
  shape: WorkerShape,
  secs: number,
  dir: string,
  signal: AbortSignal,
): Promise<string> {
  const fleet = await FaultyFleet.start(o.workers, shape, 1, dir);
  const random = seededRandom(7);
  const faults = ROWS.filter((r) => !r.id.startsWith("none") && !r.gatewayFlags);
  try {
    const gw = await startGateway("smg-soak", fleet.urls, o.timeoutSecs, 0, dir);
    try {
      const t0 = performance.now();
      const end = t0 + secs * 1000;
      const windows: { id: string; from: number; to: number; extra: BadOutcome[] }[] = [];
      const samples: Sample[] = [];
      const sampler = (async () => {
        for (let k = 1; performance.now() < end && !signal.aborted; k++) {
          await sleepUntil(t0 + k * SAMPLE_SECS * 1000, signal);
          const [p, lag] = await Promise.all([procSample(gw.pid, gw.promUrl), lagAfter(gw.url, 5)]);
          samples.push({ atSecs: (performance.now() - t0) / 1000, ...p, lagP50: lag.p50 });
        }
      })();
      const injector = (async () => {
        for (let k = 1; t0 + (k * PERIOD_SECS + FAULT_SECS) * 1000 < end && !signal.aborted; k++) {
          const start = t0 + k * PERIOD_SECS * 1000;
          await sleepUntil(start, signal);
          const row = faults[Math.floor(random() * faults.length)];
          const env: RowEnv = {
            fleet,
            gateway: gw,
            o: { ...o, faultFrom: 0, faultTo: FAULT_SECS },
            deadlineMs: (o.timeoutSecs + o.marginSecs) * 1000,
            at: (s) => sleepUntil(start + s * 1000, signal),
            signal,
          };
          const injected = await row.inject(env).finally(() => fleet.healAll().catch(() => {}));
          windows.push({
            id: row.id,
            from: start - t0,
            to: start - t0 + FAULT_SECS * 1000,
            extra: injected.extra,
          });
        }
      })();
      const load = await runLoad({ ...loadOptions(o, gw.url, signal), secs });
      await Promise.all([sampler, injector]);
      return report(secs, load.records, windows, samples, o);
    } finally {
      await stop([gw.child]);
    }
  } finally {
    await fleet.stop();
  }
}

function report(
  secs: number,
  records: { atMs: number; outcome: BadOutcome }[],
  windows: { id: string; from: number; to: number; extra: BadOutcome[] }[],
  samples: Sample[],
  o: MatrixOptions,
): string {
  const all = countOutcomes([...records.map((r) => r.outcome), ...windows.flatMap((w) => w.extra)]);
  const warmup = Math.min(WARMUP_SECS, secs / 5);
  const late = samples.filter((s) => s.atSecs >= warmup);
  const mins = late.map((s) => s.atSecs / 60);
  const first = late[0], last = late.at(-1);
  const lines = [
    `soak: ${secs} s at ${o.rate} req/s, a fault every ${PERIOD_SECS} s for ${FAULT_SECS} s; ` +
    `${all.started} requests, ${all.ok} 2xx, ${all.hung} hung, failed: ${
      Object.entries(all.failed).map(([k, n]) => `${k} ${n}`).join(", ") || "none"
    }`,
    "",
    `after ${warmup} s (${late.length} samples): RSS ${first?.rssMb.toFixed(1)} → ${
      last?.rssMb.toFixed(1)
    } MB, slope ${slope(mins, late.map((s) => s.rssMb)).toFixed(2)} MB/min; heap in use ${
      first?.heapMb.toFixed(1)
    } → ${last?.heapMb.toFixed(1)} MB, slope ${
      slope(mins, late.map((s) => s.heapMb)).toFixed(2)
    } MB/min; fds ${first?.fds} → ${last?.fds}, slope ${
      slope(mins, late.map((s) => s.fds)).toFixed(2)
    }/min; liveness p50 ${first?.lagP50.toFixed(1)} → ${last?.lagP50.toFixed(1)} ms, slope ${
      slope(mins, late.map((s) => s.lagP50)).toFixed(3)
    } ms/min`,
    "",
    `| fault | windows | requests started in a window or the ${
      PERIOD_SECS - FAULT_SECS
    } s after it | 2xx | failed | hung |`,
    "|---|---|---|---|---|---|",
  ];
  const ids = [...new Set(windows.map((w) => w.id))].sort();
  // A fault's effects outlast its window (requests it held end up to a timeout later; breakers it
  // opened stay open a while): a request counts against the last fault begun before it.
  const inWindow = (r: { atMs: number }, w: { from: number; to: number }) =>
    r.atMs >= w.from && r.atMs < w.from + PERIOD_SECS * 1000;
  for (const id of ids) {
    const ws = windows.filter((w) => w.id === id);
    const outs = [
      ...records.filter((r) => ws.some((w) => inWindow(r, w))).map((r) => r.outcome),
      ...ws.flatMap((w) => w.extra),
    ];
    const c = countOutcomes(outs);
    lines.push(
      `| ${id} | ${ws.length} | ${c.started} | ${c.ok} | ${
        outcomeList(outs.filter((x) => x !== "ok" && x !== "hung")) || "–"
      } | ${c.hung} |`,
    );
  }
  const quiet = records.filter((r) => !windows.some((w) => inWindow(r, w)));
  const q = countOutcomes(quiet.map((r) => r.outcome));
  lines.push(
    `| (no fault) | – | ${q.started} | ${q.ok} | ${
      outcomeList(quiet.map((r) => r.outcome).filter((x) => x !== "ok" && x !== "hung"))
    } | ${q.hung} |`,
  );
  return lines.join("\n");
}
