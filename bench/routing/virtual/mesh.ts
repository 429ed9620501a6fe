/**
 * Several virtual routers as one mesh, for `bench:virtual`'s `#N-mesh` targets: each router runs
 * the mesh's own tree sync (`lib/mesh/adapters/tree_sync.ts`) and, with `loadMs`, load sync
 * (`load_sync.ts`) on the virtual clock, over in-memory streams that deliver every envelope on the
 * next turn. Every pair's stream is open from the start; each router starts its rounds offset by
 * its share of a round, as independent routers' timers are. Not modelled: SWIM membership, lost
 * or late frames, queue limits, and the wire's own cost.
 */

import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { LoadSync } from "../../../lib/mesh/adapters/load_sync.ts";
import { TreeSync } from "../../../lib/mesh/adapters/tree_sync.ts";
import type { StreamPort } from "../../../lib/mesh/streams.ts";
import type { EnvelopeType } from "../../../lib/mesh/wire.ts";
import type { PolicyReplicas } from "../../../lib/policies/replicas.ts";
import type { Worker } from "../../../lib/workers/worker.ts";
import type { VirtualClock } from "./clock.ts";

/** How the virtual routers share. */
export interface VirtualMeshOptions {
  /** ms between a router's tree-sync rounds (the mesh's `roundMs`, 1000). */
  roundMs: number;
  /** Load sync's interval (`--mesh-load-sync-ms`), ms; null: no load sync. */
  loadMs: number | null;
}

/** One router's adapters. */
interface Router {
  trees: TreeSync;
  loads: LoadSync | null;
}

/**
 * Connects the routers (`replicas` and `workers`, each router's records of the same workers) as a
 * mesh on `clock` until `signal` aborts.
 */
export function connectMesh(
  replicas: readonly PolicyReplicas[],
  workers: readonly (readonly Worker[])[],
  clock: VirtualClock,
  o: VirtualMeshOptions,
  signal: AbortSignal,
): void {
  const n = replicas.length;
  const names = replicas.map((_, i) => `r${i + 1}`);
  const routers: Router[] = replicas.map((r, i) => ({
    trees: new TreeSync({
      replicas: r,
      clock,
      log: silentLogger,
      random: seededRandom(1000 + i),
      name: names[i],
      roundMs: o.roundMs,
    }),
    loads: o.loadMs === null ? null : new LoadSync({
      workers: () => workers[i],
      clock,
      intervalMs: o.loadMs,
      log: silentLogger,
    }),
  }));
  const deliver = (to: Router, from: string, type: EnvelopeType, payload: Uint8Array) => {
    to.trees.onEnvelope(from, type, payload);
    to.loads?.onEnvelope(from, type, payload);
  };
  routers.forEach((r, i) => {
    const port: StreamPort = {
      openPeers: () => names.filter((_, j) => j !== i),
      send(peer, type, payload) {
        const to = routers[names.indexOf(peer)];
        clock.after(0, () => signal.aborted || deliver(to, names[i], type, payload));
        return true;
      },
    };
    for (const peer of port.openPeers()) {
      r.trees.peerChanged(peer, true);
      r.loads?.peerChanged(peer, true);
    }
    clock.after(o.roundMs * i / n, () => {
      if (signal.aborted) return;
      r.trees.attach(port);
      r.loads?.attach(port);
    });
  });
  signal.addEventListener("abort", () => {
    for (const r of routers) {
      r.trees.stop();
      r.loads?.stop();
    }
  }, { once: true });
}
