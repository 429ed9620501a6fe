/**
 * Router pods as membership hints, row by row of SMG's pod-to-member mapping (docs/operations.md,
 * "Kubernetes discovery"): Running and Ready is ready at the pod IP and the mesh-port annotation
 * (else our own port); not ready is not_ready; deleted, terminating or missing from a relist is
 * gone.
 */

import assert from "node:assert/strict";
import { RouterDiscovery } from "../../lib/discovery/router_discovery.ts";
import { pod } from "../support/fake_kube.ts";

const R = { "app.kubernetes.io/component": "router" };

Deno.test("router discovery: every row of the pod-to-member mapping", () => {
  const seen: string[] = [];
  const r = new RouterDiscovery((n, a, s) => seen.push(`${n} ${a} ${s}`), 39527);
  r.onList([
    pod("smg-0", "10.0.0.1", R, { annotations: { "sglang.ai/mesh-port": "40000" } }),
    pod("smg-1", "10.0.0.2", R),
    pod("smg-2", "10.0.0.3", R, { ready: false }),
  ]);
  assert.deepEqual(seen.splice(0), [
    "smg-0 10.0.0.1:40000 ready",
    "smg-1 10.0.0.2:39527 ready",
    "smg-2 10.0.0.3:39527 not_ready",
  ]);
  const terminating = pod("smg-1", "10.0.0.2", R);
  terminating.metadata!.deletionTimestamp = "2026-12-01T00:00:00Z";
  r.onEvent("MODIFIED", terminating);
  r.onEvent("DELETED", pod("smg-2", "10.0.0.3", R));
  r.onEvent("ADDED", pod("smg-3", "", R, { phase: "Pending" }));
  assert.deepEqual(seen.splice(0), [
    "smg-1 10.0.0.2:39527 gone",
    "smg-2 10.0.0.3:39527 gone",
    "smg-3  not_ready",
  ]);
  r.onList([pod("smg-3", "fd00::3", R)]); // smg-0 vanished while the watch was down
  assert.deepEqual(seen.splice(0), ["smg-3 [fd00::3]:39527 ready", "smg-0 10.0.0.1:40000 gone"]);
});
