/**
 * What the fault matrix reads from a gateway process: its resident memory and open file
 * descriptors from `/proc` (through `cat` and `ls`: Deno refuses reads under `/proc` without
 * `--allow-all`, see `bench/overhead/cpu.ts`), its V8 heap and retry counters from `/metrics`
 * (`smg_process_heap_used_bytes`: what RSS cannot tell, whether memory is still in use), and its
 * event-loop lag as the latency of `GET /liveness` (no lag metric exists): probed in a row at a
 * steady pace, and in a burst of sequential probes after it.
 */

import { metricSum } from "../mesh/failover.ts";

/** A process's memory and descriptors. */
export interface ProcSample {
  /** Resident set, MB. */
  rssMb: number;
  /** V8 heap in use (live objects and garbage not yet collected), MB. */
  heapMb: number;
  /** Open file descriptors. */
  fds: number;
}

async function output(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return new TextDecoder().decode(out.stdout);
}

const MB = 1024 * 1024;

/**
 * RSS (`VmRSS` of `/proc/PID/status`), the entries of `/proc/PID/fd`, and the heap in use from
 * the gateway's metrics at `promUrl`.
 */
export async function procSample(pid: number, promUrl: string): Promise<ProcSample> {
  const [status, fds, metrics] = await Promise.all([
    output("cat", [`/proc/${pid}/status`]),
    output("ls", [`/proc/${pid}/fd`]),
    fetch(`${promUrl}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text()),
  ]);
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? NaN);
  return {
    rssMb: kb / 1024,
    heapMb: metricSum(metrics, "smg_process_heap_used_bytes") / MB,
    fds: fds.split("\n").filter((l) => l.trim() !== "").length,
  };
}

/** The gateway counters a row reports (sums over their label sets). */
export interface GatewayCounters {
  /** `smg_worker_retries_total`: attempts after the first. */
  retries: number;
  /** `smg_worker_retries_exhausted_total`: requests that failed after their last attempt. */
  exhausted: number;
  /** `smg_worker_cb_transitions_total` to open. */
  breakerOpens: number;
}

/** The gateway's counters from its metrics port. */
export async function counters(promUrl: string): Promise<GatewayCounters> {
  const res = await fetch(`${promUrl}/metrics`, { signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  return {
    retries: metricSum(text, "smg_worker_retries_total"),
    exhausted: metricSum(text, "smg_worker_retries_exhausted_total"),
    breakerOpens: metricSum(text, "smg_worker_cb_transitions_total", 'to="open"'),
  };
}

/** `after - before`, field by field. */
export function countersDelta(a: GatewayCounters, b: GatewayCounters): GatewayCounters {
  return {
    retries: b.retries - a.retries,
    exhausted: b.exhausted - a.exhausted,
    breakerOpens: b.breakerOpens - a.breakerOpens,
  };
}

/** ms one `GET /liveness` takes (`timeoutMs` when it does not answer in time). */
export async function livenessMs(url: string, timeoutMs = 2000): Promise<number> {
  const t = performance.now();
  try {
    const res = await fetch(`${url}/liveness`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return performance.now() - t;
  } catch {
    return timeoutMs;
  }
}

/** Median and maximum of `n` sequential liveness probes. */
export async function lagAfter(url: string, n = 20): Promise<{ p50: number; max: number }> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) xs.push(await livenessMs(url));
  xs.sort((a, b) => a - b);
  return { p50: xs[Math.floor(n / 2)], max: xs[n - 1] };
}

/** Probes liveness every `everyMs` until stopped; `stop()` resolves with the slowest probe. */
export function livenessProber(url: string, everyMs: number): { stop(): Promise<number> } {
  let max = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      max = Math.max(max, await livenessMs(url));
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (performance.now() - t))));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return max;
    },
  };
}
