/**
 * The virtual gateway's load monitor: `lib/workers/load_monitor.ts` in miniature. In: the
 * workers' records, their engines, the load-monitor settings and the policy's needs. Out: on each
 * record, every `--load-monitor-interval`, the engine's `/v1/loads` body (`loadsBody`) parsed as
 * the gateway parses it (`parseLoads`), its arrival time and the overload veto. It polls when the
 * real one would: unless `--disable-load-monitoring` is given and neither a veto nor the policy
 * needs loads. Known gap: the first poll is at the start, where the real one's phase is wherever
 * the gateway's start left it.
 */

import type { LoadMonitorConfig } from "../../../lib/config/config.ts";
import type { Policy } from "../../../lib/policies/mod.ts";
import type { SimEngine } from "../../../lib/sim/engine.ts";
import { loadsBody } from "../../../lib/sim/observe.ts";
import { parseLoads } from "../../../lib/workers/load_report.ts";
import type { Worker } from "../../../lib/workers/worker.ts";
import type { VirtualClock } from "./clock.ts";

/** Whether the monitor polls (`LoadMonitor.active` with `wanted` = the policy's needs). */
export function monitorsLoads(c: LoadMonitorConfig, policy: Policy): boolean {
  return !c.disabled || c.overloadTokenUsage !== null || c.overloadWaitingRequests !== null ||
    policy.needs.backendLoads;
}

/** One poll at `now`: each worker's report from its engine, and its overload veto. */
export function pollLoads(
  c: LoadMonitorConfig,
  workers: readonly Worker[],
  engines: readonly SimEngine[],
  now: number,
): void {
  workers.forEach((w, i) => {
    const snap = parseLoads(loadsBody(engines[i].stats()));
    if (!snap) return;
    w.load = snap;
    w.loadAt = now;
    w.overloaded =
      (c.overloadWaitingRequests !== null && snap.waitingRequests >= c.overloadWaitingRequests) ||
      (c.overloadTokenUsage !== null && snap.tokenUsage >= c.overloadTokenUsage);
  });
}

/** Polls now and every `c.intervalSecs` on `clock` until `signal` aborts. */
export function runLoadMonitor(
  c: LoadMonitorConfig,
  workers: readonly Worker[],
  engines: readonly SimEngine[],
  clock: VirtualClock,
  signal: AbortSignal,
): void {
  let cancel = () => {};
  const tick = () => {
    pollLoads(c, workers, engines, clock.now());
    cancel = clock.after(c.intervalSecs * 1000, tick);
  };
  if (signal.aborted) return;
  signal.addEventListener("abort", () => cancel(), { once: true });
  tick();
}
