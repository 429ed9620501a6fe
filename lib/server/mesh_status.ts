/**
 * `GET /mesh/status`: this router's name and every member, itself included, with the store's
 * key counts per namespace; 404 `mesh_disabled` without `--enable-mesh`, 503
 * `mesh_unavailable` when the mesh could not start.
 */

import { errorResponse, GatewayError } from "../core/errors.ts";
import type { Mesh } from "../mesh/adapters/feature.ts";
import { WORKERS_NS } from "../mesh/adapters/worker_sync.ts";
import { PINS_NS } from "../mesh/adapters/pin_sync.ts";
import { RATE_LIMIT_NS } from "../mesh/adapters/rate_limit_sync.ts";
import { RATIO_NS } from "../mesh/adapters/ratio_sync.ts";

/** `GET /mesh/status`: this router's name and every member, itself included. */
export function meshStatus(mesh: Mesh | null): Response {
  if (!mesh) {
    return errorResponse(
      new GatewayError(404, "mesh_disabled", "the mesh is off; start with --enable-mesh"),
    );
  }
  if (mesh.failure) {
    return errorResponse(new GatewayError(503, "mesh_unavailable", mesh.failure));
  }
  const n = mesh.node;
  const store = Object.fromEntries(mesh.store.counts());
  return Response.json({
    name: n.name,
    status: n.status,
    local_health: n.localHealth,
    members: n.members(),
    store: {
      [WORKERS_NS]: { live: 0, tombstones: 0 },
      [PINS_NS]: { live: 0, tombstones: 0 },
      [RATE_LIMIT_NS]: { live: 0, tombstones: 0 },
      [RATIO_NS]: { live: 0, tombstones: 0 },
      ...store,
    },
  });
}
