/**
 * The fault matrix's mesh rows: three routers (`--enable-mesh`, the matrix's gateway flags)
 * behind HAProxy (`bench/mesh/routers.ts`'s configuration: roundrobin, health checks every
 * 500 ms, retries with redispatch on connection failures), all in front of the healthy fleet,
 * the steady load sent to HAProxy. Router r3 runs inside a cgroup of its own (`partition.ts`)
 * when this machine allows it. Rows, on one cluster in this order:
 *
 * - `router-stop`: r3 frozen (SIGSTOP) from `faultFrom` to `faultTo`, then SIGCONT: its kernel
 *   still accepts connections, so what it does after SIGCONT is what a healed router does with
 *   requests that waited.
 * - `router-cut`: r3 partitioned from `faultFrom` to `faultTo`: every packet of its connections
 *   (HAProxy, peers, workers) dropped both ways, then healed. HAProxy's checks take it out; the
 *   requests it held when cut may fail (counted apart, as a killed router's).
 * - `router-split`: only r3's mesh connections cut for the same window; it keeps serving
 *   HAProxy's requests with the workers it knows. Nothing may fail.
 * - `router-kill`: r3 SIGKILLed at `faultFrom`. Requests in flight on it may fail (they are
 *   counted apart); no other request may.
 *
 * After the rows that leave r3 alive, the bench waits until every router sees both peers ALIVE
 * with their streams open again (how long that took is in the row's note). Figures: counters,
 * RSS, heap and descriptors summed over the routers alive after the row (compared with the same
 * routers' just before it), the lag of the worst of them, liveness probed on r1 during the row.
 */

import { type Child, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { haproxyConfig, meshFlags, type MeshStatus, waitMeshReady } from "../mesh/routers.ts";
import type { FaultyFleet } from "./fleet.ts";
import { type GatewayProc, startGateway, waitUntilHealthy } from "./gateway.ts";
import { runLoad } from "./load.ts";
import {
  countOutcomes,
  loadOptions,
  type MatrixOptions,
  type RowResult,
  steadyLatency,
} from "./matrix.ts";
import { Partition } from "./partition.ts";
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

/** The mesh rows, in the order they run. */
export const MESH_ROWS = ["router-stop", "router-cut", "router-split", "router-kill"] as const;

/** Rows that need r3 in a cgroup of its own. */
const PARTITION_ROWS: readonly string[] = ["router-cut", "router-split"];

interface Cluster {
  routers: GatewayProc[];
  /** Each router's mesh port. */
  meshPorts: number[];
  url: string;
  children: Child[];
}

async function startCluster(
  fleet: FaultyFleet,
  o: MatrixOptions,
  cpu: number,
  dir: string,
  partition: Partition | null,
): Promise<Cluster> {
  const ports = freePorts(ROUTERS * 3);
  const routers: GatewayProc[] = [];
  const children: Child[] = [];
  try {
    for (let i = 0; i < ROUTERS; i++) {
      const [port, promPort, meshPort] = ports.slice(i * 3, i * 3 + 3);
      routers.push(
        await startGateway(`mesh-r${i + 1}`, fleet.urls, o.timeoutSecs, cpu, dir, {
          extra: meshFlags(i, meshPort, ports[2]),
          allEnv: true,
          ports: [port, promPort],
          wrap: i === ROUTERS - 1 && partition ? (cmd) => partition.wrap(cmd) : undefined,
        }),
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
    return { routers, meshPorts: ports.filter((_, k) => k % 3 === 2), url, children };
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

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What a mesh row's fault did. */
interface MeshFault {
  note: string;
  /** ms into the load when r3 stopped answering for good (killed) or for a while (cut). */
  cutAtMs: number | null;
  /** r3 is gone (left out of the samples after the row). */
  killed: boolean;
}

/** One mesh row: the load through HAProxy, `fault` run on r3 alongside it. */
async function meshRow(
  id: string,
  title: string,
  cluster: Cluster,
  fleet: FaultyFleet,
  o: MatrixOptions,
  signal: AbortSignal,
  fault: (r3: GatewayProc, t0: number) => Promise<MeshFault>,
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
  let note = f.note;
  if (!f.killed) {
    const healing = performance.now();
    for (const r of routers) await waitMeshReady(r.child, r.url, ROUTERS);
    note += `; mesh whole again ${((performance.now() - healing) / 1000).toFixed(1)} s after ` +
      `the load ended`;
  }
  const alive = f.killed ? routers.slice(0, ROUTERS - 1) : routers;
  // Nothing the fault did may leave a router short of a worker (or its health).
  for (const r of alive) await waitUntilHealthy(r, fleet.urls.length, 50);
  note += `; every router alive counts all ${fleet.urls.length} workers healthy`;
  await pause(o.settleSecs * 1000);
  const after = await Promise.all(alive.map((r) => counters(r.promUrl)));
  const procs = await Promise.all(alive.map((r) => procSample(r.pid, r.promUrl)));
  const lags = await Promise.all(alive.map((r) => lagAfter(r.url)));
  if (f.cutAtMs !== null) {
    const k = f.cutAtMs;
    const failed = load.records.filter((r) => r.outcome !== "ok");
    const inFlight = failed.filter((r) => r.atMs <= k && r.atMs + r.ms >= k).length;
    note += `; failed: ${inFlight} in flight when r3 ${f.killed ? "died" : "was cut off"}, ${
      failed.length - inFlight
    } others`;
  }
  return {
    id,
    title,
    ...countOutcomes(load.records.map((r) => r.outcome)),
    skipped: load.skipped,
    steadyMs: steadyLatency(load.records),
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

/** How r1 sees r3 now: `ALIVE`, `SUSPECTED`, `DOWN`… (` (no stream)` without one), or `gone`. */
async function r3State(r1: GatewayProc): Promise<string | null> {
  try {
    const res = await fetch(`${r1.url}/mesh/status`, { signal: AbortSignal.timeout(1000) });
    const m = await res.json() as MeshStatus;
    const r3 = m.members.find((p) => p.name === `r${ROUTERS}`);
    return r3 ? `${r3.status}${r3.stream ? "" : " (no stream)"}` : "gone";
  } catch {
    return null; // r1 busy: the next poll
  }
}

/**
 * Polls r1's view of r3 every 200 ms until `untilMs` (on `performance.now()`) or until `done`
 * holds for a state: the distinct states seen, in order.
 */
async function watchR3(
  r1: GatewayProc,
  untilMs: number,
  done: (state: string) => boolean = () => false,
): Promise<string[]> {
  const seen: string[] = [];
  while (performance.now() < untilMs) {
    const state = await r3State(r1);
    if (state !== null && seen.at(-1) !== state) seen.push(state);
    if (state !== null && done(state)) break;
    await pause(Math.min(200, Math.max(0, untilMs - performance.now())));
  }
  return seen;
}

/** The rows' faults on r3, by id; `at(t0, s)` resolves `s` seconds into the load. */
function faults(
  o: MatrixOptions,
  cluster: Cluster,
  partition: Partition | null,
): Record<string, [string, (r3: GatewayProc, t0: number) => Promise<MeshFault>]> {
  const at = (t0: number, secs: number) => pause(t0 + secs * 1000 - performance.now());
  const window = `${o.faultFrom}-${o.faultTo} s`;
  const cut = async (t0: number, narrow: boolean): Promise<MeshFault> => {
    await at(t0, o.faultFrom);
    const cutAtMs = performance.now() - t0;
    const mesh = cluster.meshPorts;
    const r1 = cluster.routers[0];
    await partition!.cut(
      narrow ? { own: [mesh[ROUTERS - 1]], remote: mesh.slice(0, ROUTERS - 1) } : undefined,
    );
    let dropped = 0;
    let seen: string[];
    try {
      seen = await watchR3(r1, t0 + o.faultTo * 1000);
    } finally {
      dropped = (await partition!.heal()).dropped;
    }
    // SWIM pings flow all the time: a cut that dropped nothing did not take (a cgroup or
    // conntrack setup this code does not expect), and the row would pass for nothing.
    if (dropped === 0) throw new Error("the partition dropped no packet: it did not take");
    const healed = performance.now();
    const back = await watchR3(r1, healed + 15_000, (st) => st === "ALIVE");
    const backIn = back.at(-1) === "ALIVE"
      ? `ALIVE with its stream ${((performance.now() - healed) / 1000).toFixed(1)} s after the heal`
      : `still ${back.at(-1)} 15 s after the heal`;
    const what = narrow ? "r3's mesh connections" : "r3 of 3";
    return {
      note: `${what} cut off ${window} (${dropped} packets dropped; r1 saw r3 ${
        seen.join(" → ")
      }, then ${backIn})`,
      cutAtMs: narrow ? null : cutAtMs,
      killed: false,
    };
  };
  return {
    "router-stop": ["router frozen (SIGSTOP/SIGCONT)", async (r3, t0) => {
      await at(t0, o.faultFrom);
      r3.child.proc.kill("SIGSTOP");
      try {
        await at(t0, o.faultTo);
      } finally {
        r3.child.proc.kill("SIGCONT");
      }
      return { note: `r3 of 3 frozen ${window}`, cutAtMs: null, killed: false };
    }],
    "router-cut": ["router partitioned (every connection)", (_, t0) => cut(t0, false)],
    "router-split": ["router cut off from its peers only", (_, t0) => cut(t0, true)],
    "router-kill": ["router SIGKILLed", async (r3, t0) => {
      await at(t0, o.faultFrom);
      r3.child.proc.kill("SIGKILL");
      return {
        note: `r3 of 3 SIGKILLed at ${o.faultFrom} s`,
        cutAtMs: performance.now() - t0,
        killed: true,
      };
    }],
  };
}

/** Runs the mesh rows named in `ids` (of `MESH_ROWS`) on one fresh cluster, in that order. */
export async function runMeshRows(
  ids: readonly string[],
  fleet: FaultyFleet,
  o: MatrixOptions,
  cpu: number,
  dir: string,
  signal: AbortSignal,
): Promise<RowResult[]> {
  await fleet.healAll();
  let wanted = MESH_ROWS.filter((id) => ids.includes(id));
  let partition: Partition | null = null;
  if (wanted.some((id) => PARTITION_ROWS.includes(id))) {
    const p = await Partition.open();
    if (p instanceof Partition) partition = p;
    else {
      console.error(`bench:faults: skipping ${PARTITION_ROWS.join(", ")}: ${p.skip}`);
      wanted = wanted.filter((id) => !PARTITION_ROWS.includes(id));
    }
  }
  const rows: RowResult[] = [];
  try {
    const cluster = await startCluster(fleet, o, cpu, dir, partition);
    try {
      const byId = faults(o, cluster, partition);
      for (const id of wanted) {
        const [title, fault] = byId[id];
        console.error(`bench:faults: ${title}`);
        rows.push(await meshRow(id, title, cluster, fleet, o, signal, fault));
      }
    } finally {
      await stop(cluster.children);
    }
  } finally {
    await partition?.close();
  }
  return rows;
}
