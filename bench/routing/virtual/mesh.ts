/**
 * Several virtual routers as one mesh, for `bench:virtual`'s `#N-mesh` targets: what tree sync
 * (`lib/mesh/adapters/tree_sync.ts`) does between real routers, on the virtual clock and without
 * the wire. Each router's shared trees publish through its own `PolicyReplicas` sinks into a
 * buffer; once a round (`roundMs`, each router's round offset by its share of it, as independent
 * routers' timers are) the buffer goes to every other router in the order it was made: a delta
 * becomes a placement (`SharedTrees.applyDelta`), a correction is applied once and its relay, if
 * any, is published by the router that made it. With `loadMs`, each router's own load per worker
 * reaches the others as load sync sends it (`shareLoads`). Not modelled: repairs (the routers
 * start empty together), lost or late rounds, and the wire's bytes.
 */

import { RECENT_WORK_TAU_MS } from "../../../lib/core/types.ts";
import type { TreeKind } from "../../../lib/policies/cache_aware/shared_paths.ts";
import type { PolicyReplicas, TreeCorrection, TreeRole } from "../../../lib/policies/replicas.ts";
import type { Worker } from "../../../lib/workers/worker.ts";
import type { VirtualClock } from "./clock.ts";

/** How the virtual routers share. */
export interface VirtualMeshOptions {
  /** ms between a router's rounds (tree sync's `roundMs`, 1000). */
  roundMs: number;
  /**
   * ms between a router's load reports (load sync's interval): each other router then holds its
   * in-flight requests and prefill backlog per worker as the worker's peer load; null: none.
   */
  loadMs: number | null;
}

type Shared =
  | { op: "delta"; role: TreeRole; model: string; kind: TreeKind; hash: number; worker: string }
  | { op: "correction"; role: TreeRole; model: string; kind: TreeKind; c: TreeCorrection };

/**
 * Connects the routers (`replicas` and `workers`, each router's records of the same workers in
 * the same order) as a mesh on `clock` until `signal` aborts.
 */
export function connectMesh(
  replicas: readonly PolicyReplicas[],
  workers: readonly (readonly Worker[])[],
  clock: VirtualClock,
  o: VirtualMeshOptions,
  signal: AbortSignal,
): { deltas: () => number } {
  if (o.loadMs !== null) shareLoads(workers, clock, o.loadMs, signal);
  const buffers = replicas.map(() => [] as Shared[]);
  let deltas = 0;
  let ids = 0;
  replicas.forEach((r, i) => {
    r.deltaSink = (role, model, kind, hash, worker) =>
      buffers[i].push({ op: "delta", role, model, kind, hash, worker });
    r.correctionSink = (role, model, kind, c) => {
      const id = `r${i}/${++ids}`;
      buffers[i].push({ op: "correction", role, model, kind, c: { ...c, id } });
      return id;
    };
  });
  const round = (i: number) => {
    if (signal.aborted) return;
    const out = buffers[i].splice(0);
    replicas.forEach((peer, j) => {
      if (j === i) return;
      for (const x of out) {
        const trees = peer.treesFor(x.role, x.model);
        if (trees === null) continue;
        if (x.op === "delta") {
          trees.applyDelta(x.model, x.kind, x.hash, x.worker);
          deltas++;
          continue;
        }
        const relay = trees.applyCorrection(x.model, x.kind, x.c);
        if (relay) peer.correctionSink?.(x.role, x.model, x.kind, relay);
      }
    });
    clock.after(o.roundMs, () => round(i));
  };
  replicas.forEach((_, i) => clock.after(o.roundMs * (i + 1) / replicas.length, () => round(i)));
  return { deltas: () => deltas };
}

/**
 * Every `ms` (each router offset by its share), router j's own in-flight requests, prefill
 * backlog and recent work per worker reach every other router, which holds each peer's last
 * report and counts their sum as the worker's peer load (the recent work decayed since).
 */
function shareLoads(
  workers: readonly (readonly Worker[])[],
  clock: VirtualClock,
  ms: number,
  signal: AbortSignal,
): void {
  const n = workers.length;
  // told[i][j][k]: what router j last told router i of worker k, and when.
  const told = workers.map(() =>
    workers.map((own) => own.map(() => ({ inFlight: 0, tokens: 0, work: 0, at: 0 })))
  );
  const report = (j: number) => {
    if (signal.aborted) return;
    const now = clock.now();
    for (let i = 0; i < n; i++) {
      if (i === j) continue;
      workers[j].forEach((w, k) => {
        const work = w.ownRecentWork(now);
        told[i][j][k] = { inFlight: w.ownInFlight, tokens: w.ownPrefillTokens, work, at: now };
        let inFlight = 0;
        let tokens = 0;
        let recent = 0;
        for (let p = 0; p < n; p++) {
          if (p === i) continue;
          const t = told[i][p][k];
          inFlight += t.inFlight;
          tokens += t.tokens;
          recent += t.work * Math.exp(-(now - t.at) / RECENT_WORK_TAU_MS);
        }
        const x = workers[i][k];
        x.peerInFlight = inFlight;
        x.peerPrefillTokens = tokens;
        x.peerRecentWork = recent;
        x.peerRecentWorkAt = now;
      });
    }
    clock.after(ms, () => report(j));
  };
  workers.forEach((_, j) => clock.after(ms * (j + 1) / n, () => report(j)));
}
