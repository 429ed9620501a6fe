/**
 * Idle mesh traffic: a fresh mesh with nothing else running in its namespaces; once it formed
 * and warmed up, the pollers are stopped, each router's `eth0` byte counters are read, nothing
 * happens for `windowSecs`, and the counters are read again (the reads are sysfs, no traffic).
 * /mesh/status is asked once per router after the window, to check the mesh stayed whole. The
 * pollers talk over each namespace's loopback anyway, so they never showed on `eth0`.
 * Bytes are whole Ethernet frames (SWIM probes, sync-stream heartbeats, push-pull, TCP acks, ARP).
 */

import { Cluster } from "./chaos_cluster.ts";
import type { Testbed } from "./chaos_netns.ts";
import type { ProcessGroup } from "./chaos_proc.ts";
import { quantile, sleep } from "./chaos_stats.ts";
import { allAlive } from "./chaos_watch.ts";

/** Options of the idle measurement. */
export interface IdleOptions {
  /** Routers (default 5). */
  n?: number;
  /** Measurement window, s (default 60). */
  windowSecs?: number;
  /** Wait after the mesh formed before the window, s (default 10). */
  warmupSecs?: number;
  /** Longest wait for the mesh to form, ms (default 60 s). */
  formLimitMs?: number;
  /** Router logs go to `<logDir>/idle/` (default /tmp/smg-chaos). */
  logDir?: string;
}

/** One router's traffic. */
export interface IdleRouter {
  /** Router. */
  name: string;
  /** Bytes/s sent. */
  tx: number;
  /** Bytes/s received. */
  rx: number;
  /** Bytes/s both ways. */
  total: number;
}

/** Median and max over routers, bytes/s. */
export interface Spread {
  /** Median. */
  median: number;
  /** Max. */
  max: number;
}

/** The idle result. */
export interface IdleResult {
  /** Routers. */
  n: number;
  /** Window actually measured, s. */
  secs: number;
  /** Per router. */
  routers: IdleRouter[];
  /** Bytes/s sent, over routers. */
  tx: Spread;
  /** Bytes/s received. */
  rx: Spread;
  /** Bytes/s both ways. */
  total: Spread;
  /** Whether every router still listed every router ALIVE after the window. */
  wholeAfter: boolean;
}

function spread(xs: number[]): Spread {
  return { median: quantile(xs, 0.5) ?? 0, max: Math.max(...xs) };
}

/** Measures idle traffic on a fresh mesh. */
export async function runIdle(
  procs: ProcessGroup,
  bed: Testbed,
  opts: IdleOptions = {},
): Promise<IdleResult> {
  const o: Required<IdleOptions> = {
    n: 5,
    windowSecs: 60,
    warmupSecs: 10,
    formLimitMs: 60_000,
    logDir: "/tmp/smg-chaos",
    ...opts,
  };
  const logDir = `${o.logDir}/idle`;
  await Deno.mkdir(logDir, { recursive: true });
  const c = new Cluster(procs, bed, { n: o.n, logDir, pollMs: 1000 });
  try {
    await c.start();
    await c.formed(o.formLimitMs, 0);
    await sleep(o.warmupSecs * 1000);
    await c.stopPollers();
    const before = (await bed.counters()).slice(0, c.n);
    const t0 = performance.now();
    await sleep(o.windowSecs * 1000);
    const after = (await bed.counters()).slice(0, c.n);
    const secs = (performance.now() - t0) / 1000;
    const views = await Promise.all(c.names.map((_, i) => c.statusOnce(i)));
    const routers = c.names.map((name, i) => {
      const tx = (after[i].tx - before[i].tx) / secs;
      const rx = (after[i].rx - before[i].rx) / secs;
      return { name, tx, rx, total: tx + rx };
    });
    return {
      n: c.n,
      secs,
      routers,
      tx: spread(routers.map((r) => r.tx)),
      rx: spread(routers.map((r) => r.rx)),
      total: spread(routers.map((r) => r.total)),
      wholeAfter: views.every((v) => allAlive({ ...v, observer: "" }, c.names, 0)),
    };
  } finally {
    await c.stop();
  }
}
