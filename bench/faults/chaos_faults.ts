/**
 * The chaos benchmark's faults: a plan (pure: which worker, what, when, for how long) and its
 * execution on a `SimFleet`. Every `everyMs` one worker in turn is faulted, alternately killed
 * (SIGKILL, started again on its port `restartMs` later) and frozen (SIGSTOP for `stallMs`, then
 * SIGCONT). A fault that would last past the load, or fall on a worker still faulted, is left
 * out, so every worker is back by the load's end.
 */

import { sleep, systemClock } from "../../lib/core/clock.ts";
import type { SimFleet } from "./chaos_sims.ts";

/** What is done to a worker. */
export type FaultKind = "kill" | "stall";

/** One planned fault. */
export interface PlannedFault {
  kind: FaultKind;
  /** The worker's index. */
  worker: number;
  /** When it starts, ms after the load's start. */
  atMs: number;
  /** How long the worker is out: until its restart begins, or until it is thawed. */
  forMs: number;
}

/** A fault as it happened: also when the worker was back (restarted and healthy, or thawed). */
export interface FaultRecord extends PlannedFault {
  /** The worker's URL. */
  url: string;
  /** When it started and when the worker was back, ms since the load's start (NaN: never). */
  startMs: number;
  endMs: number;
}

/** The schedule of `faultPlan`. */
export interface FaultSchedule {
  /** Workers, faulted in turn. */
  workers: number;
  /** The load's length, ms. */
  durationMs: number;
  /** Between faults, ms (the first one after one interval). */
  everyMs: number;
  /** A killed worker's start again after, ms. */
  restartMs: number;
  /** A frozen worker's thaw after, ms. */
  stallMs: number;
}

/** The faults of `s`: kill and stall alternately, worker 0, 1, … in turn. */
export function faultPlan(s: FaultSchedule): PlannedFault[] {
  const plan: PlannedFault[] = [];
  const busyUntil = new Array<number>(s.workers).fill(0);
  for (let k = 0, at = s.everyMs; at < s.durationMs && k < 10_000; k++, at += s.everyMs) {
    const kind: FaultKind = k % 2 === 0 ? "kill" : "stall";
    const worker = k % s.workers;
    const forMs = kind === "kill" ? s.restartMs : s.stallMs;
    if (at + forMs > s.durationMs || at < busyUntil[worker]) continue;
    busyUntil[worker] = at + forMs;
    plan.push({ kind, worker, atMs: at, forMs });
  }
  return plan;
}

/**
 * Runs `plan` on `fleet` from `t0` (`performance.now()` at the load's start), each fault on its
 * own so that a long stall overlaps the next fault. Resolves once every worker is back; on abort,
 * thaws whatever it froze and stops early.
 */
export async function runFaults(
  plan: PlannedFault[],
  fleet: SimFleet,
  t0: number,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<FaultRecord[]> {
  const records: FaultRecord[] = [];
  const since = () => performance.now() - t0;
  const one = async (f: PlannedFault) => {
    await sleep(systemClock, Math.max(0, t0 + f.atMs - performance.now()), signal);
    const r: FaultRecord = { ...f, url: fleet.urls[f.worker], startMs: since(), endMs: NaN };
    records.push(r);
    log(`${f.kind} worker ${f.worker} at ${(r.startMs / 1000).toFixed(1)} s`);
    if (f.kind === "kill") {
      await fleet.kill(f.worker);
      await sleep(systemClock, f.forMs, signal);
      await fleet.restart(f.worker);
    } else {
      fleet.freeze(f.worker);
      try {
        await sleep(systemClock, f.forMs, signal);
      } finally {
        fleet.thaw(f.worker);
      }
    }
    r.endMs = since();
  };
  const settled = await Promise.allSettled(plan.map(one));
  const failed = settled.find((s) => s.status === "rejected");
  if (failed && !signal.aborted) throw (failed as PromiseRejectedResult).reason;
  return records.sort((a, b) => a.startMs - b.startMs);
}
