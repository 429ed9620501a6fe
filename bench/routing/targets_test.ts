/** Which targets a workload gives no meaning to, and why. */

import assert from "node:assert/strict";
import { allTargets, meaningless, resolveTargets } from "./targets.ts";

Deno.test("targets: the references of the other workload and the session hashes are skipped", () => {
  const all = allTargets();
  assert.deepEqual(Object.keys(meaningless(all, "synthetic")), ["ref:affinity"]);
  assert.deepEqual(Object.keys(meaningless(all, "trace")), [
    "ref:oracle",
    "haproxy:hash-session",
    "nginx:hash-session",
  ]);
  assert.match(meaningless(all, "trace")["ref:oracle"], /tenants/);
  // The kind `ref` names all three references; the workload then drops one.
  const refs = resolveTargets(["ref"]).targets.map((t) => t.name);
  assert.deepEqual(refs, ["ref:upper-bound", "ref:oracle", "ref:affinity"]);
});

Deno.test("targets: one of our policies with gateway flags after @ is a target of its own", () => {
  const { targets } = resolveTargets([
    "smg:round_robin",
    "smg:cache_aware/smg@--cache-aware-work-weight=0.3@--tree-feedback=off",
  ]);
  assert.deepEqual(targets.map((t) => t.name), [
    "smg:round_robin",
    "smg:cache_aware/smg@--cache-aware-work-weight=0.3@--tree-feedback=off",
  ]);
  const t = targets[1];
  assert.equal(t.kind, "smg");
  if (t.kind === "smg") {
    assert.deepEqual(t.flags, [
      "--cache-aware-scoring",
      "smg",
      "--wait-model",
      "smg",
      "--cache-aware-work-weight",
      "0.3",
      "--tree-feedback",
      "off",
    ]);
  }
  assert.throws(() => resolveTargets(["haproxy:roundrobin@--x=1"]), /only for smg/);
});

Deno.test("targets: #N is N routers behind a front, #N-mesh on a mesh, flags kept", () => {
  const { targets } = resolveTargets([
    "smg:cache_aware#3",
    "smg:cache_aware@--cache-aware-work-weight=0.3#5-mesh",
  ]);
  assert.deepEqual(targets.map((t) => t.name), [
    "smg:cache_aware#3",
    "smg:cache_aware@--cache-aware-work-weight=0.3#5-mesh",
  ]);
  const [a, b] = targets;
  assert.ok(a.kind === "smg" && b.kind === "smg");
  assert.deepEqual(a.routers, { n: 3, mesh: false });
  assert.deepEqual(b.routers, { n: 5, mesh: true });
  assert.deepEqual(b.flags, ["--cache-aware-work-weight", "0.3"]);
  assert.throws(() => resolveTargets(["haproxy:roundrobin#3"]), /one smg:<policy>/);
  assert.throws(() => resolveTargets(["smg#3"]), /one smg:<policy>/);
  assert.throws(() => resolveTargets(["smg:cache_aware#0"]), /N ≥ 1/);
});
