/**
 * Measures one target: a warm-up wrk run at 64 connections (not recorded), then one recorded run
 * per connection count, each with the proxy's CPU time and both CPUs' busy share around it.
 * Proxy CPU µs/req: the proxy process's utime+stime (all threads, `/proc/PID/stat`) over the
 * run, divided by the requests wrk completed.
 */

import { busyPct, sampleCpu } from "./cpu.ts";
import type { Options } from "./options.ts";
import { round, round1 } from "./stats.ts";
import { wrk, type WrkResult } from "./wrk.ts";

/** One recorded run. */
export interface Row extends WrkResult {
  target: string;
  conns: number;
  round: number;
  /** Proxy CPU per completed request, µs (null for direct). */
  proxyCpuUsPerReq: number | null;
  /** Proxy CPU share of one core over the run, %. */
  proxyCpuPct: number | null;
  cpu0BusyPct: number | null;
  cpu1BusyPct: number | null;
}

/** What is measured: a name, the URL wrk loads and the proxy process to account CPU to. */
export interface Target {
  name: string;
  url: string;
  /** The proxy's pid, or null (direct). */
  pid: number | null;
}

/** Warms `t` up, then records one run per connection count, logging each to stderr. */
export async function measure(
  t: Target,
  o: Options,
  roundNo: number,
  clkTck: number,
  script: string,
): Promise<Row[]> {
  await wrk(t.url, 64, o.warmup, script);
  const rows: Row[] = [];
  for (const conns of o.conns) {
    const before = await sampleCpu(t.pid);
    const r = await wrk(t.url, conns, o.duration, script);
    const after = await sampleCpu(t.pid);
    const cpuSec = (after.ticks - before.ticks) / clkTck;
    rows.push({
      target: t.name,
      conns,
      round: roundNo,
      ...r,
      proxyCpuUsPerReq: t.pid === null || r.requests === 0
        ? null
        : round1(cpuSec * 1e6 / r.requests),
      proxyCpuPct: t.pid === null ? null : round(100 * cpuSec / r.seconds, 0),
      cpu0BusyPct: busyPct(before.load, after.load, "cpu0"),
      cpu1BusyPct: busyPct(before.load, after.load, "cpu1"),
    });
    const last = rows[rows.length - 1];
    console.error(
      `  ${t.name} c=${conns}: ${Math.round(last.rps)} req/s, p50 ${last.p50Ms} ms, ` +
        `p99 ${last.p99Ms} ms, cpu ${last.proxyCpuUsPerReq ?? "-"} µs/req`,
    );
  }
  return rows;
}
