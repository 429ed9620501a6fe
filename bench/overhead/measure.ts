/**
 * Measures one target: a warm-up wrk run at 64 connections (not recorded), then one recorded run
 * per connection count, each with the proxy's CPU time and both CPUs' busy share around it. For
 * the paced SSE case (`sse` given) the warm-up and the one recorded run use its connection
 * count, and each wrk request is a whole stream.
 * Proxy CPU µs/req: the proxy process's utime+stime (all threads, `/proc/PID/stat`) over the
 * run, divided by the requests wrk completed (for SSE also by the events in each stream).
 */

import { busyPct, sampleCpu } from "./cpu.ts";
import type { Options } from "./options.ts";
import { round, round1 } from "./stats.ts";
import { wrk, type WrkResult } from "./wrk.ts";

/** One recorded run. */
export interface Row extends WrkResult {
  target: string;
  /** "tiny" (the non-streaming request) or "sse" (paced streams; a request is a stream). */
  load: "tiny" | "sse";
  conns: number;
  round: number;
  /** Proxy CPU per completed request (stream), µs (null for direct). */
  proxyCpuUsPerReq: number | null;
  /** Proxy CPU per relayed SSE event, µs (null for direct and the tiny request). */
  proxyCpuUsPerEvent: number | null;
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

/** The paced SSE case: its connection count and the events the worker sends per stream. */
export interface SseLoad {
  conns: number;
  events: number;
}

/** Warms `t` up, then records one run per connection count, logging each to stderr. */
export async function measure(
  t: Target,
  o: Options,
  roundNo: number,
  clkTck: number,
  script: string,
  sse: SseLoad | null = null,
): Promise<Row[]> {
  await wrk(t.url, sse?.conns ?? 64, o.warmup, script);
  const rows: Row[] = [];
  for (const conns of sse ? [sse.conns] : o.conns) {
    const before = await sampleCpu(t.pid);
    const r = await wrk(t.url, conns, o.duration, script);
    const after = await sampleCpu(t.pid);
    const cpuSec = (after.ticks - before.ticks) / clkTck;
    const perReq = t.pid === null || r.requests === 0 ? null : cpuSec * 1e6 / r.requests;
    rows.push({
      target: t.name,
      load: sse ? "sse" : "tiny",
      conns,
      round: roundNo,
      ...r,
      proxyCpuUsPerReq: perReq === null ? null : round1(perReq),
      proxyCpuUsPerEvent: perReq === null || !sse ? null : round(perReq / sse.events, 2),
      proxyCpuPct: t.pid === null ? null : round(100 * cpuSec / r.seconds, 0),
      cpu0BusyPct: busyPct(before.load, after.load, "cpu0"),
      cpu1BusyPct: busyPct(before.load, after.load, "cpu1"),
    });
    const last = rows[rows.length - 1];
    const unit = sse ? "stream" : "req";
    console.error(
      `  ${t.name}${sse ? " sse" : ""} c=${conns}: ${Math.round(last.rps)} ${unit}/s, ` +
        `p50 ${last.p50Ms} ms, p99 ${last.p99Ms} ms, cpu ${
          last.proxyCpuUsPerReq ?? "-"
        } µs/${unit}` +
        (sse ? ` (${last.proxyCpuUsPerEvent ?? "-"} µs/event)` : ""),
    );
  }
  return rows;
}
