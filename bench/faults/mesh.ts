/**
 * The fault matrix's mesh rows: three routers (`--enable-mesh`, the matrix's gateway flags)
 * behind HAProxy (`bench/mesh/routers.ts`'s configuration: roundrobin, health checks every
 * 500 ms, retries with redispatch), all in front of the healthy fleet, the steady load sent to
 * HAProxy. Rows, on one cluster in this order:
 *
 * - `router-stop`: router r3 frozen (SIGSTOP) from `faultFrom` to `faultTo`, then SIGCONT. This
 *   stands for a partition: cutting one router off on loopback would need it in its own network
 *   namespace, with HAProxy reaching it across a veth (see `bench/mesh/chaos_netns.ts`), which
 *   this bench does not build. A frozen router is cut off from clients and peers alike, but its
 *   kernel still accepts connections, so what it does after SIGCONT is what a healed router does
 *   with requests that waited.
 * - `router-kill`: r3 SIGKILLed at `faultFrom`. Requests in flight on it may fail (they are
 *   counted apart); no other request may.
 *
 * Figures: counters, RSS and descriptors summed over the routers alive after the row (compared
 * with the same routers' just before it), the lag of the worst of them, liveness probed on r1
 * during the row.
 */

import { type Child, freePorts, HOST, spawn, stop, waitFor } from "../overhead/processes.ts";
import { haproxyConfig, meshFlags, waitMeshReady } from "../mesh/routers.ts";
import type { FaultyFleet } from "./fleet.ts";
import { type GatewayProc, startGateway } from "./gateway.ts";
import { runLoad } from "./load.ts";
import { countOutcomes, loadOptions, type MatrixOptions, type RowResult } from "./matrix.ts";
import {
  counters,
  countersDelta,
  type GatewayCounters,
  lagAfter,
  livenessProber,
  type ProcSample,
  procSample,
} from "./probe.ts";

const ROUTERS = 3;

async function startCluster(fleet: FaultyFleet, o: MatrixOptions, cpu: number, dir: string) {
  const ports = freePorts(ROUTERS * 3);
  const routers: GatewayProc[] = [];
  const children: Child[] = [];
  try {
    for (let i = 0; i < ROUTERS; i++) {
      const [port, promPort, meshPort] = ports.slice(i * 3, i * 3 + 3);
      routers.push(
        await startGateway(
          `mesh-r${i + 1}`,
          fleet.urls,
          o.timeoutSecs,
          cpu,
          dir,
          meshFlags(i, meshPort, ports[2]),
          true,
          [port, promPort],
        ),
      );
      children.push(routers[i].child);
    }
    for (const r of routers) await waitMeshReady(r.child, r.url, ROUTERS);
    const [port] = freePorts(1);
    const cfg = `${dir}/haproxy.cfg`;
    // HAProxy keeps idle connections to the routers for reuse and purges half of them every
    // `pool-purge-delay` (5 s by default): quicker here, so that what stays open after a row's
    // settle pause is the routers' doing, not HAProxy's pool.
    const config = haproxyConfig(port, routers, true).replaceAll(
      "check inter 500ms",
      "check inter 500ms pool-purge-delay 250ms",
    );
    await Deno.writeTextFile(cfg, config);
    const haproxy = await spawn("haproxy", cpu, ["haproxy", "-db", "-f", cfg], dir, dir);
    children.push(haproxy);
    const url = `http://${HOST}:${port}`;
    await waitFor("haproxy", haproxy, `${url}/health`, (s) => s === 200);
    return { routers, url, children };
  } catch (e) {
    await stop(children);
    throw e;
  }
}

const sum = (xs: GatewayCounters[]): GatewayCounters => ({
  retries: xs.reduce((a, x) => a + x.retries, 0),
  exhausted: xs.reduce((a, x) => a + x.exhausted, 0),
  breakerOpens: xs.reduce((a, x) => a + x.breakerOpens, 0),
});

const total = (ps: ProcSample[]): ProcSample => ({
  rssMb: ps.reduce((a, p) => a + p.rssMb, 0),
  heapMb: ps.reduce((a, p) => a + p.heapMb, 0),
  fds: ps.reduce((a, p) => a + p.fds, 0),
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One mesh row: the load through HAProxy, `fault` run on r3 alongside it. */
async function meshRow(
  id: string,
  title: string,
  cluster: Awaited<ReturnType<typeof startCluster>>,
  fleet: FaultyFleet,
  o: MatrixOptions,
  signal: AbortSignal,
  fault: (r3: GatewayProc, t0: number) => Promise<{ note: string; killAtMs: number | null }>,
): Promise<RowResult> {
  const started = performance.now();
  const { routers } = cluster;
  const before = await Promise.all(routers.map((r) => counters(r.promUrl)));
  const procsBefore = await Promise.all(routers.map((r) => procSample(r.pid, r.promUrl)));
  const prober = livenessProber(routers[0].url, 250);
  const t0 = performance.now();
  const [load, f] = await Promise.all([
    runLoad(loadOptions(o, cluster.url, signal)),
    fault(routers[ROUTERS - 1], t0),
  ]);
  const livenessMaxMs = await prober.stop();
  await pause(o.settleSecs * 1000);
  const alive = f.killAtMs === null ? routers : routers.slice(0, ROUTERS - 1);
  const after = await Promise.all(alive.map((r) => counters(r.promUrl)));
  const procs = await Promise.all(alive.map((r) => procSample(r.pid, r.promUrl)));
  const lags = await Promise.all(alive.map((r) => lagAfter(r.url)));
  let note = f.note;
  if (f.killAtMs !== null) {
    const k = f.killAtMs;
    const failed = load.records.filter((r) => r.outcome !== "ok");
    const inFlight = failed.filter((r) => r.atMs <= k && r.atMs + r.ms >= k).length;
    note += `; failed: ${inFlight} in flight at the kill, ${failed.length - inFlight} others`;
  }
  return {
    id,
    title,
    ...countOutcomes(load.records.map((r) => r.outcome)),
    skipped: load.skipped,
    counters: countersDelta(sum(before.slice(0, alive.length)), sum(after)),
    faulted: 0,
    workerOpen: (await fleet.stats()).reduce((a, s) => a + s.open, 0),
    processes: alive.length,
    proc: total(procs),
    procBefore: total(procsBefore.slice(0, alive.length)),
    lag: { p50: Math.max(...lags.map((l) => l.p50)), max: Math.max(...lags.map((l) => l.max)) },
    livenessMaxMs,
    note,
    secs: (performance.now() - started) / 1000,
  };
}

/** Runs the mesh rows named in `ids` (`router-stop`, `router-kill`) on one fresh cluster. */
export async function runMeshRows(
  ids: readonly string[],
  fleet: FaultyFleet,
  o: MatrixOptions,
  cpu: number,
  dir: string,
  signal: AbortSignal,
): Promise<RowResult[]> {
  await fleet.healAll();
  const cluster = await startCluster(fleet, o, cpu, dir);
  const at = (t0: number, secs: number) => pause(t0 + secs * 1000 - performance.now());
  const rows: RowResult[] = [];
  try {
    if (ids.includes("router-stop")) {
      rows.push(
        await meshRow(
          "router-stop",
          "router frozen (SIGSTOP/SIGCONT)",
          cluster,
          fleet,
          o,
          signal,
          async (r3, t0) => {
            await at(t0, o.faultFrom);
            r3.child.proc.kill("SIGSTOP");
            try {
              await at(t0, o.faultTo);
            } finally {
              r3.child.proc.kill("SIGCONT");
            }
            return { note: `r3 of 3 frozen ${o.faultFrom}-${o.faultTo} s`, killAtMs: null };
          },
        ),
      );
      for (const r of cluster.routers) await waitMeshReady(r.child, r.url, ROUTERS);
    }
    if (ids.includes("router-kill")) {
      rows.push(
        await meshRow(
          "router-kill",
          "router SIGKILLed",
          cluster,
          fleet,
          o,
          signal,
          async (r3, t0) => {
            await at(t0, o.faultFrom);
            r3.child.proc.kill("SIGKILL");
            return {
              note: `r3 of 3 SIGKILLed at ${o.faultFrom} s`,
              killAtMs: performance.now() - t0,
            };
          },
        ),
      );
    }
  } finally {
    await stop(cluster.children);
  }
  return rows;
}
