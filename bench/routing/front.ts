/**
 * Several of our routers as one routing-benchmark target (`smg:<policy>#N`, `#N-mesh`): N gateways
 * with the same flags, on a mesh if asked (the first the seed of the others, as the example in
 * docs/high-availability.md wires them), behind an HAProxy front that sends each request to the
 * next router in turn, as a load balancer or a Kubernetes Service spreads a conversation's turns.
 * Ready when every router counts every worker healthy and, on a mesh, sees its peers with their
 * streams open (`bench/mesh/routers.ts`), and the front answers.
 */

import { parsePidTicks } from "../overhead/cpu.ts";
import { type Child, HOST, run, spawn, stop, waitFor } from "../../support/processes.ts";
import { round } from "../overhead/stats.ts";
import { haproxyConfig, startRouters } from "../mesh/routers.ts";
import { emptyHistogram, type Histogram, parseHistogram } from "./prediction.ts";
import type { RouterCost } from "./summary.ts";
import type { TargetContext } from "./target_context.ts";

/** Clock ticks a second in `/proc/PID/stat` (USER_HZ, 100 on Linux whatever the kernel's HZ). */
const TICKS_PER_S = 100;

/** A started target: every process, and our routers' metrics URLs and processes. */
export interface Started {
  /** Everything to stop, front included. */
  children: Child[];
  /** Our gateway's `/metrics`, one per router (none for HAProxy or nginx). */
  metrics: string[];
  /** Our routers' processes (their CPU is read over the window). */
  routers: Child[];
}

/** `n` routers with `--policy policy` and `flags`, on a mesh if `mesh`, behind a front on `c.port`. */
export async function startFront(
  policy: string,
  c: TargetContext,
  flags: string[],
  n: number,
  mesh: boolean,
): Promise<Started> {
  if (c.labels?.some((l) => Object.keys(l).length > 0)) {
    throw new Error("several routers are measured with HTTP workers only (no KV-event labels)");
  }
  const routers = await startRouters({
    n,
    mesh,
    workers: c.workers,
    flags: ["--policy", policy, ...flags, ...(c.modelPath ? ["--model-path", c.modelPath] : [])],
    tag: `${c.tag}-smg`,
    seed: c.seed,
    cpu: c.cpu,
    dir: c.dir,
    root: c.root,
    denoFlags: c.modelPath ? [`--allow-read=${c.modelPath}`] : [],
  });
  const children = routers.map((r) => r.child);
  try {
    const cfg = `${c.dir}/${c.tag}-front.cfg`;
    await Deno.writeTextFile(cfg, haproxyConfig(c.port, routers, false));
    const front = await spawn(`${c.tag}-front`, c.cpu, ["haproxy", "-db", "-f", cfg], c.dir, c.dir);
    children.push(front);
    await waitFor("the routers' front", front, `http://${HOST}:${c.port}/health`, (s) => s === 200);
  } catch (e) {
    await stop(children);
    throw e;
  }
  return {
    children,
    metrics: routers.map((r) => `http://${HOST}:${r.promPort}/metrics`),
    routers: children.slice(0, n),
  };
}

/** One router at one time: its prediction histogram, tree-sync bytes sent, CPU ticks so far. */
export interface RouterReading {
  histogram: Histogram;
  treeBytes: number;
  ticks: number;
}

const TREE_BYTES = "router_mesh_tree_bytes_sent_total";

/** Reads every router of `s` (a router that cannot be read reads as nothing). */
export async function readRouters(s: Started): Promise<RouterReading[]> {
  const stats = s.routers.length === 0
    ? ""
    : await run("cat", s.routers.map((c) => `/proc/${c.proc.pid}/stat`));
  const ticks = new Map<number, number>();
  for (const line of stats.split("\n").filter((l) => /^\d+ \(/.test(l))) {
    ticks.set(Number(line.slice(0, line.indexOf(" "))), parsePidTicks(line));
  }
  return await Promise.all(s.routers.map(async (c, i) => {
    const text = await fetch(s.metrics[i], { signal: AbortSignal.timeout(5000) })
      .then((r) => r.text(), () => "");
    const treeBytes = text.split("\n").filter((l) => l.startsWith(TREE_BYTES))
      .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    return {
      histogram: text ? parseHistogram(text) : emptyHistogram(),
      treeBytes,
      ticks: ticks.get(c.proc.pid) ?? 0,
    };
  }));
}

/** What the routers of `r` cost between two readings, per ok request (`requests`). */
export function routerCost(
  r: { n: number; mesh: boolean },
  before: readonly RouterReading[],
  after: readonly RouterReading[],
  requests: number,
): RouterCost {
  const total = (rs: readonly RouterReading[], f: (x: RouterReading) => number) =>
    rs.reduce((a, x) => a + f(x), 0);
  const per = (x: number) => requests > 0 ? x / requests : null;
  const ticks = total(after, (x) => x.ticks) - total(before, (x) => x.ticks);
  const bytes = total(after, (x) => x.treeBytes) - total(before, (x) => x.treeBytes);
  const us = per(ticks * 1e6 / TICKS_PER_S);
  const b = per(bytes);
  return {
    n: r.n,
    mesh: r.mesh,
    cpuUsPerRequest: us === null ? null : round(us, 0),
    treeBytesPerRequest: b === null ? null : round(b, 0),
  };
}
