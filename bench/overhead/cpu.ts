/**
 * CPU accounting from `/proc` (Linux only): a process's utime+stime over all its threads, from
 * `/proc/PID/stat`, and every CPU's busy and total jiffies, from `/proc/stat`. Both are in clock
 * ticks; the caller divides by `getconf CLK_TCK`.
 *
 * The files are read through `cat`, not `Deno.readTextFile`: Deno refuses every read under
 * `/proc` without `--allow-all`, even with `--allow-read=/proc`, and the task runs with explicit
 * permissions only.
 */

import { round } from "./stats.ts";

/** Busy and total jiffies per CPU (`cpu0`, `cpu1`, …). */
export type CpuLoad = Map<string, { busy: number; total: number }>;

/** One reading: every CPU's jiffies and one process's utime+stime ticks (0 without a pid). */
export interface CpuSample {
  load: CpuLoad;
  ticks: number;
}

/** utime+stime in ticks from one `/proc/PID/stat` line. */
export function parsePidTicks(stat: string): number {
  // Fields after the `(comm)`; utime and stime are fields 14 and 15 of the whole line.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(rest[11]) + Number(rest[12]);
}

/** Busy and total jiffies of each CPU, from `/proc/stat` text. */
export function parseCpuLoad(text: string): CpuLoad {
  const m: CpuLoad = new Map();
  for (const line of text.split("\n")) {
    const match = /^(cpu\d+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const f = match[2].split(/\s+/).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    m.set(match[1], { busy: total - f[3] - f[4], total });
  }
  return m;
}

/** Reads `/proc/stat` and, given a pid, `/proc/PID/stat`, in one `cat`. */
export async function sampleCpu(pid: number | null): Promise<CpuSample> {
  const files = pid === null ? ["/proc/stat"] : ["/proc/stat", `/proc/${pid}/stat`];
  const out = await new Deno.Command("cat", {
    args: files,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  if (!out.success) {
    throw new Error(`cat ${files.join(" ")} failed: ${decoder.decode(out.stderr).trim()}`);
  }
  const text = decoder.decode(out.stdout);
  if (pid === null) return { load: parseCpuLoad(text), ticks: 0 };
  // /proc/stat has no line starting with a pid, so the last such line is the process's.
  const at = text.lastIndexOf(`\n${pid} (`);
  if (at < 0) throw new Error(`no /proc/${pid}/stat line in:\n${text}`);
  return { load: parseCpuLoad(text.slice(0, at)), ticks: parsePidTicks(text.slice(at + 1)) };
}

/** Whole-percent busy share of `cpu` between two samples, or null if it cannot be told. */
export function busyPct(before: CpuLoad, after: CpuLoad, cpu: string): number | null {
  const a = before.get(cpu), b = after.get(cpu);
  if (!a || !b || b.total === a.total) return null;
  return round(100 * (b.busy - a.busy) / (b.total - a.total), 0);
}
