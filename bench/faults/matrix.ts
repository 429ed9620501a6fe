/**
 * Runs one row of the fault matrix against one gateway: the fleet healed and counted healthy,
 * the steady load (`load.ts`) with the row's fault injected alongside it (`rows.ts`), every
 * request ended (answered, failed or hung: each has a deadline), then after a settle pause the
 * gateway's memory, descriptors, event-loop lag and retry counters, and what the workers still
 * hold open. Mesh rows (`mesh.ts`) produce the same `RowResult`.
 */

import type { BadOutcome } from "./bad_clients.ts";
import type { FaultyFleet } from "./fleet.ts";
import { type GatewayProc, waitUntilHealthy } from "./gateway.ts";
import { type LoadOptions, type LoadResult, runLoad, type Sent } from "./load.ts";
import {
  counters,
  countersDelta,
  type GatewayCounters,
  lagAfter,
  livenessProber,
  type ProcSample,
  procSample,
} from "./probe.ts";

/** The matrix's settings (`run.ts` parses them; each has its default there). */
export interface MatrixOptions {
  /** Steady requests per second. */
  rate: number;
  /** Seconds of steady load per row. */
  secs: number;
  /** Share of requests that stream. */
  streamShare: number;
  /** Workers in the fleet. */
  workers: number;
  /** The gateway's `--request-timeout-secs`. */
  timeoutSecs: number;
  /** Seconds past the request timeout before a request counts as hung. */
  marginSecs: number;
  /** When each row's fault starts and ends, seconds into the load. */
  faultFrom: number;
  faultTo: number;
  /** Seconds between the last request's end and the row's samples. */
  settleSecs: number;
  /** Requests per second the fleet serves at most (its slots over the mean service time). */
  capacity: number;
  /** Seconds the burst row's burst lasts. */
  burstSecs: number;
}

/** What a row's fault did besides the steady load. */
export interface Injected {
  /** Requests of misbehaving clients, or of a burst, by outcome. */
  extra: BadOutcome[];
  /** A line about the fault (counts of what it did). */
  note: string;
}

/** What a row's fault may use. */
export interface RowEnv {
  fleet: FaultyFleet;
  gateway: GatewayProc;
  o: MatrixOptions;
  /** ms a request may take before it counts as hung. */
  deadlineMs: number;
  /** Resolves at `secs` into the row's load (at once if that has passed). */
  at(secs: number): Promise<void>;
  signal: AbortSignal;
}

/** A row of the matrix. */
export interface Row {
  /** Short id (`--rows` filter). */
  id: string;
  /** What fails. */
  title: string;
  /**
   * Gateway flags of its own: the row runs on a gateway started for it with these (compared
   * with that gateway before the row), not on the shared one.
   */
  gatewayFlags?: string[];
  /** Injects the fault while the load runs; resolves once its own traffic has ended. */
  inject(env: RowEnv): Promise<Injected>;
}

/** One row's figures. */
export interface RowResult {
  id: string;
  title: string;
  /** Requests started (steady load and the fault's own). */
  started: number;
  ok: number;
  /** Failed requests by outcome (status, `sse-error`, `cut`, `net`, `left`). */
  failed: Record<string, number>;
  hung: number;
  /** Steady requests not sent because too many were in flight. */
  skipped: number;
  /** The steady load's 2xx whole answers: p50 and p99 ms (what the fault cost the others). */
  steadyMs: { p50: number; p99: number };
  counters: GatewayCounters;
  /** Inference requests the workers gave the fault to. */
  faulted: number;
  /** Inference requests the workers still held open after the row. */
  workerOpen: number;
  /** Gateway processes measured (`proc` is their sum). */
  processes: number;
  proc: ProcSample;
  /** The same process(es) before the row, when compared with that instead of a baseline row. */
  procBefore?: ProcSample;
  lag: { p50: number; max: number };
  /** Slowest liveness probe during the row, ms. */
  livenessMaxMs: number;
  note: string;
  /** Seconds the row took. */
  secs: number;
}

/** Folds outcomes into the result's counts. */
export function countOutcomes(
  outcomes: readonly BadOutcome[],
): Pick<RowResult, "started" | "ok" | "failed" | "hung"> {
  const failed: Record<string, number> = {};
  let ok = 0, hung = 0;
  for (const k of outcomes) {
    if (k === "ok") ok++;
    else if (k === "hung") hung++;
    else failed[k] = (failed[k] ?? 0) + 1;
  }
  return { started: outcomes.length, ok, failed, hung };
}

/** p50 and p99 ms of the whole answers among `records` that were answered 2xx (NaN: none). */
export function steadyLatency(records: readonly Sent[]): { p50: number; p99: number } {
  const xs = records.filter((r) => r.outcome === "ok" && !r.stream).map((r) => r.ms).sort((a, b) =>
    a - b
  );
  const at = (q: number) =>
    xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] : NaN;
  return { p50: at(0.5), p99: at(0.99) };
}

/** The load's settings for a row against `url`. */
export function loadOptions(o: MatrixOptions, url: string, signal: AbortSignal): LoadOptions {
  return {
    url,
    rate: o.rate,
    secs: o.secs,
    streamShare: o.streamShare,
    deadlineMs: (o.timeoutSecs + o.marginSecs) * 1000,
    maxInFlight: 2000,
    signal,
  };
}

/** Resolves after `ms` (at once for 0 or less), or as soon as `signal` aborts. */
export const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** Runs `row` against `gateway` in front of `fleet`. */
export async function runRow(
  row: Row,
  fleet: FaultyFleet,
  gateway: GatewayProc,
  o: MatrixOptions,
  signal: AbortSignal,
): Promise<RowResult> {
  const started = performance.now();
  await fleet.healAll();
  await waitUntilHealthy(gateway, o.workers);
  const before = await counters(gateway.promUrl);
  const procBefore = row.gatewayFlags ? await procSample(gateway.pid, gateway.promUrl) : undefined;
  const statsBefore = await fleet.stats();
  const prober = livenessProber(gateway.url, 250);
  const t0 = performance.now();
  const env: RowEnv = {
    fleet,
    gateway,
    o,
    deadlineMs: (o.timeoutSecs + o.marginSecs) * 1000,
    at: (secs) => sleep(t0 + secs * 1000 - performance.now(), signal),
    signal,
  };
  let load: LoadResult, injected: Injected;
  try {
    [load, injected] = await Promise.all([
      runLoad(loadOptions(o, gateway.url, signal)),
      row.inject(env),
    ]);
  } finally {
    await fleet.healAll().catch(() => {});
  }
  const livenessMaxMs = await prober.stop();
  await sleep(o.settleSecs * 1000, signal);
  const [after, statsAfter, proc, lag] = await Promise.all([
    counters(gateway.promUrl),
    fleet.stats(),
    procSample(gateway.pid, gateway.promUrl),
    lagAfter(gateway.url),
  ]);
  const outcomes = [...load.records.map((r: Sent) => r.outcome), ...injected.extra];
  return {
    id: row.id,
    title: row.title,
    ...countOutcomes(outcomes),
    skipped: load.skipped,
    steadyMs: steadyLatency(load.records),
    counters: countersDelta(before, after),
    // A restarted worker counts from 0 again.
    faulted: statsAfter.reduce((a, s, i) => a + Math.max(0, s.faulted - statsBefore[i].faulted), 0),
    workerOpen: statsAfter.reduce((a, s) => a + s.open, 0),
    processes: 1,
    proc,
    procBefore,
    lag,
    livenessMaxMs,
    note: injected.note,
    secs: (performance.now() - started) / 1000,
  };
}
