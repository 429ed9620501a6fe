/**
 * The status page as a feature of the gateway: the routing history (sampled on the
 * gateway's clock while the gateway runs), the snapshot's inputs read from the registry, the
 * metrics and the mesh, and the two answers both ports serve. The metrics port serves them as
 * openly as `/metrics`; the main port serves the page openly (it holds no data) and the snapshot
 * behind the control-plane keys (`main_routes.ts`).
 */

import type { Clock } from "../core/clock.ts";
import { type Feature, loopFeature } from "../core/feature.ts";
import { dashboardPage, dashboardSnapshot } from "./http.ts";
import { RoutingHistory } from "./history.ts";
import type { DashboardMesh, SnapshotDeps } from "./snapshot.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { TextRatios } from "../workers/text_ratios.ts";
import type { Mesh } from "../mesh/adapters/feature.ts";
import { SlowRequests } from "./slow.ts";

/** What the status page reads. */
export interface DashboardInputs {
  /** The workers. */
  registry: WorkerRegistry;
  /** The gateway's metrics. */
  metrics: Metrics;
  /** The gateway's clock. */
  clock: Clock;
  /** Whether the gateway is draining. */
  draining: () => boolean;
  /** The default policy's name. */
  policy: string;
  /** The mesh, or null when it is off. */
  mesh: Mesh | null;
  /** Characters per token per model, learned from the answers. */
  ratios: TextRatios;
  /** Whether requests are traced (`--enable-trace`): then the slow ones are listed. */
  tracing?: boolean;
}

/** The status page of one gateway, as a feature: started, it samples the routing history. */
export interface Dashboard extends Feature {
  /** The routing history, sampled on the gateway's clock between `start` and `stop`. */
  history: RoutingHistory;
  /** `GET /dashboard`. */
  page(): Response;
  /** `GET /dashboard/snapshot?since=N`. */
  snapshot(url: URL): Response;
  /** The recent slow requests, told of each traced request as it ends (null: tracing off). */
  slow: SlowRequests | null;
}

/** Builds the status page over `d` (nothing runs until `history.run`). */
export function createDashboard(d: DashboardInputs): Dashboard {
  const mesh = d.mesh;
  const slow = d.tracing ? new SlowRequests() : null;
  const history = new RoutingHistory({
    metrics: d.metrics,
    clock: d.clock,
    meshLag: mesh ? () => mesh.metrics.storeAckLag.entries() : undefined,
  });
  const deps: SnapshotDeps = {
    workers: () => d.registry.all(),
    metrics: d.metrics,
    history,
    clock: d.clock,
    startedAt: d.clock.now(),
    policy: d.policy,
    draining: d.draining,
    mesh: () => (mesh ? meshView(mesh) : null),
    models: () => d.ratios.models(),
    slow,
  };
  const sampling = loopFeature("dashboard", history);
  return {
    ...sampling,
    history,
    page: dashboardPage,
    snapshot: (url) => dashboardSnapshot(deps, url),
    slow,
  };
}

/** What the page shows of `mesh`. */
function meshView(mesh: Mesh): DashboardMesh {
  const n = mesh.node;
  return {
    name: n.name,
    status: n.status,
    localHealth: n.localHealth,
    failure: mesh.failure,
    members: n.members(),
    queued: (peer) => n.streams.queued(peer),
    store: Object.fromEntries(mesh.store.counts()),
  };
}
