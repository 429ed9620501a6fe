/**
 * False-DOWN soaks on a formed mesh of real routers: `loss` drops `lossPct` % of every router's
 * transmissions for `soakSecs`; `pause` SIGSTOPs one router (in turn) for `pauseMs` every
 * `pauseEveryMs`, then SIGCONTs it. Every router's /mesh/status is polled once per `pollMs`
 * from inside its namespace; every answer listing a member DOWN is a DOWN observation, and
 * every change of a member's status in some router's answers is recorded (the first 2000).
 * Suspicions, refutations and probe results are the routers' metric deltas over the window.
 */

import { Cluster } from "./chaos_cluster.ts";
import type { LossMethod, LossStats, Testbed } from "./chaos_netns.ts";
import type { ProcessGroup } from "./chaos_proc.ts";
import { sleep } from "./chaos_stats.ts";

/** Options of one soak. */
export interface SoakOptions {
  /** What goes wrong (required in practice; default "loss"). */
  mode?: "loss" | "pause";
  /** Routers (default 5). */
  n?: number;
  /** Length of the window, s (default 600). */
  soakSecs?: number;
  /** Loss of every router's transmissions in `loss` mode, % (default 10). */
  lossPct?: number;
  /** Time between pauses in `pause` mode, ms (default 10 s). */
  pauseEveryMs?: number;
  /** Length of each pause, ms (default 2 s). */
  pauseMs?: number;
  /** Poll period of /mesh/status, ms (default 1000). */
  pollMs?: number;
  /** Longest wait for the mesh to form, ms (default 60 s). */
  formLimitMs?: number;
  /** Router logs go to `<logDir>/<mode>/` (default /tmp/smg-chaos). */
  logDir?: string;
}

/** A member changing status in one router's answers. */
export interface Transition {
  /** When (ISO). */
  t: string;
  /** Whose answer. */
  observer: string;
  /** About whom. */
  member: string;
  /** Status before. */
  from: string;
  /** Status after. */
  to: string;
  /** Incarnation after. */
  incarnation: number;
}

/** Metric deltas of one router over the window. */
export interface RouterCounts {
  /** Router. */
  name: string;
  /** router_mesh_suspicions_total delta. */
  suspicions: number;
  /** router_mesh_refutations_total delta. */
  refutations: number;
  /** router_mesh_probes_total{result="failed"} delta. */
  probesFailed: number;
  /** All router_mesh_probes_total deltas. */
  probes: number;
}

/** The result of one soak. */
export interface SoakResult {
  /** What went wrong. */
  mode: "loss" | "pause";
  /** Routers. */
  n: number;
  /** Window actually soaked, s. */
  secs: number;
  /** Answers received in the window. */
  polls: number;
  /** Polls that got no answer (a paused router does not answer). */
  failedPolls: number;
  /** Answers × members that were DOWN. */
  downObservations: number;
  /** Answers × members that were SUSPECTED. */
  suspectedObservations: number;
  /** Changes into DOWN. */
  downTransitions: Transition[];
  /** Every change seen (first 2000). */
  transitions: Transition[];
  /** Sum of the routers' suspicions. */
  suspicions: number;
  /** Sum of the routers' refutations. */
  refutations: number;
  /** Per router. */
  perRouter: RouterCounts[];
  /** Loss applied (loss mode). */
  loss?: { method: LossMethod; pct: number; applied: number; stats: LossStats[] };
  /** Pauses done (pause mode). */
  pauses?: number;
  /** Each pause as "router at ISO time" (pause mode), to find it in the logs. */
  pauseLog?: string[];
}

const PROBES = /^router_mesh_probes_total\{/;

function sumWhere(m: Map<string, number>, re: RegExp): number {
  let s = 0;
  for (const [k, v] of m) if (re.test(k)) s += v;
  return s;
}

async function counts(c: Cluster): Promise<RouterCounts[]> {
  return await Promise.all(c.names.map(async (name, i) => {
    const m = await c.metrics(i);
    return {
      name,
      suspicions: m.get("router_mesh_suspicions_total") ?? 0,
      refutations: m.get("router_mesh_refutations_total") ?? 0,
      probesFailed: m.get('router_mesh_probes_total{result="failed"}') ?? 0,
      probes: sumWhere(m, PROBES),
    };
  }));
}

/** Runs one soak on a fresh mesh. */
export async function runSoak(
  procs: ProcessGroup,
  bed: Testbed,
  opts: SoakOptions = {},
): Promise<SoakResult> {
  const o: Required<SoakOptions> = {
    mode: "loss",
    n: 5,
    soakSecs: 600,
    lossPct: 10,
    pauseEveryMs: 10_000,
    pauseMs: 2000,
    pollMs: 1000,
    formLimitMs: 60_000,
    logDir: "/tmp/smg-chaos",
    ...opts,
  };
  const logDir = `${o.logDir}/${o.mode}`;
  await Deno.mkdir(logDir, { recursive: true });
  const c = new Cluster(procs, bed, { n: o.n, logDir, pollMs: o.pollMs });
  try {
    await c.start();
    await c.formed(o.formLimitMs, 0);
    const method = o.mode === "loss" ? await bed.setLoss(o.lossPct) : null;
    const before = await counts(c);
    const r = {
      polls: 0,
      failedPolls: 0,
      downObservations: 0,
      suspectedObservations: 0,
      downTransitions: [] as Transition[],
      transitions: [] as Transition[],
    };
    const last = new Map<string, string>();
    const start = Date.now();
    const unlisten = c.watch.listen((ob) => {
      if (ob.t < start) return;
      if (!ob.ok || !ob.m) return void r.failedPolls++;
      r.polls++;
      for (const [member, [to, incarnation]] of Object.entries(ob.m)) {
        if (to === "DOWN") r.downObservations++;
        if (to === "SUSPECTED") r.suspectedObservations++;
        const key = `${ob.observer}>${member}`;
        const from = last.get(key) ?? "ALIVE";
        last.set(key, to);
        if (from === to) continue;
        const t = {
          t: new Date(ob.t).toISOString(),
          observer: ob.observer,
          member,
          from,
          to,
          incarnation,
        };
        if (r.transitions.length < 2000) r.transitions.push(t);
        if (to === "DOWN") r.downTransitions.push(t);
      }
    });
    let pauses = 0;
    const pauseLog: string[] = [];
    try {
      const end = start + o.soakSecs * 1000;
      if (o.mode === "pause") {
        const maxPauses = Math.ceil((o.soakSecs * 1000) / o.pauseEveryMs);
        while (pauses < maxPauses && Date.now() + o.pauseEveryMs <= end + 1) {
          await sleep(o.pauseEveryMs - o.pauseMs);
          const vi = pauses++ % c.n;
          pauseLog.push(`${c.names[vi]} at ${new Date().toISOString()}`);
          await c.signal(vi, "SIGSTOP");
          await sleep(o.pauseMs);
          await c.signal(vi, "SIGCONT");
        }
      }
      const rest = end - Date.now();
      if (rest > 0) await sleep(rest);
    } finally {
      unlisten();
    }
    const secs = (Date.now() - start) / 1000;
    const after = await counts(c);
    const perRouter = after.map((a, i) => ({
      name: a.name,
      suspicions: a.suspicions - before[i].suspicions,
      refutations: a.refutations - before[i].refutations,
      probesFailed: a.probesFailed - before[i].probesFailed,
      probes: a.probes - before[i].probes,
    }));
    let loss: SoakResult["loss"];
    if (method) {
      const stats = await bed.lossStats();
      const sent = stats.slice(0, c.n).reduce((s, x) => s + x.packets, 0);
      const dropped = stats.slice(0, c.n).reduce((s, x) => s + x.dropped, 0);
      loss = { method, pct: o.lossPct, applied: sent ? dropped / sent : 0, stats };
      await bed.clearLoss();
    }
    return {
      mode: o.mode,
      n: c.n,
      secs,
      ...r,
      suspicions: perRouter.reduce((s, x) => s + x.suspicions, 0),
      refutations: perRouter.reduce((s, x) => s + x.refutations, 0),
      perRouter,
      ...(loss ? { loss } : {}),
      ...(o.mode === "pause" ? { pauses, pauseLog } : {}),
    };
  } finally {
    await bed.clearLoss();
    await c.stop();
  }
}
