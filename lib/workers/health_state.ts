/**
 * The health state machine as a pure function: (status, counters, probe result) → next.
 *
 * pending   --ok-->              ready   (a worker that answers is activated at once, as SMG does)
 * pending   --startup expired--> failed
 * ready     --F fails-->         not_ready
 * not_ready --S oks-->           ready
 * not_ready --3F fails-->        failed
 * failed    --S oks-->           ready   (upstream stops probing failed workers; we keep probing so
 *                                         a worker that recovers comes back)
 * draining  --anything-->        draining
 */

import type { WorkerStatus } from "../core/types.ts";

/** Running counts kept per worker between probes. */
export interface HealthCounters {
  /** Consecutive successful probes. */
  ok: number;
  /** Consecutive failed probes. */
  fail: number;
}

/** Thresholds from the health config. */
export interface HealthThresholds {
  /** Consecutive successes to (re)enter ready. */
  success: number;
  /** Consecutive failures to leave ready. */
  failure: number;
}

/** The result of applying one probe. */
export interface HealthStep {
  /** Status after the probe. */
  status: WorkerStatus;
  /** Counters after the probe. */
  counters: HealthCounters;
}

/**
 * Applies one probe result. `startupExpired` says a pending worker has used up its start-up
 * time.
 */
export function applyProbe(
  status: WorkerStatus,
  counters: HealthCounters,
  ok: boolean,
  t: HealthThresholds,
  startupExpired = false,
): HealthStep {
  const c: HealthCounters = ok
    ? { ok: counters.ok + 1, fail: 0 }
    : { ok: 0, fail: counters.fail + 1 };
  switch (status) {
    case "draining":
      return { status, counters: c };
    case "pending":
      if (ok) return { status: "ready", counters: c };
      return { status: startupExpired ? "failed" : "pending", counters: c };
    case "ready":
      return { status: !ok && c.fail >= t.failure ? "not_ready" : "ready", counters: c };
    case "not_ready":
      if (ok) return { status: c.ok >= t.success ? "ready" : "not_ready", counters: c };
      return { status: c.fail >= 3 * t.failure ? "failed" : "not_ready", counters: c };
    case "failed":
      return { status: ok && c.ok >= t.success ? "ready" : "failed", counters: c };
  }
}
