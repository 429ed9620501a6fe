/**
 * Wires policy decision reports to metrics: every branch to our `smg_policy_decisions_total`,
 * and the branches SMG names to its own counters (`smg_manual_policy_branch_total` for manual
 * and sticky sessions, `smg_consistent_hashing_policy_branch_total`,
 * `smg_prefix_hash_policy_branch_total`), the sticky map size and the key sources; the last
 * branch is also kept (`LastDecision`), for the router to note on the pick that made it (the
 * attempt's span reads it).
 */

import type { Metrics } from "../metrics/metrics.ts";
import type { LastDecision, PolicyObserver } from "../policies/policy.ts";

/** A PolicyObserver that counts into `m` and keeps the last branch in `last` (when given). */
export function policyObserver(m: Metrics, last?: LastDecision): PolicyObserver {
  const upstream = {
    manual: m.manualBranch,
    sticky: m.manualBranch,
    consistent_hashing: m.consistentHashingBranch,
    prefix_hash: m.prefixHashBranch,
  } as const;
  return {
    decision(policy, branch) {
      if (last) last.branch = branch;
      m.policyDecisions.with(policy, branch).inc();
      upstream[policy as keyof typeof upstream]?.with(branch).inc();
    },
    stickyEntries(n) {
      m.stickyEntries.with().set(n);
    },
    keySource(source) {
      m.routingKeySource.with(source).inc();
    },
    matchRatio(policy, ratio) {
      m.matchRatio.with(policy).observe(ratio);
    },
    treeSize(model, tree, size, tenants) {
      (tree === "string" ? m.treeChars : m.treeTokens).with(model).set(size);
      m.treeTenants.with(model, tree).set(tenants);
    },
    placements(model, entries) {
      m.placements.with(model).set(entries);
    },
    treeCorrection(model, tree, units) {
      m.treeCorrections.with(model, tree).inc();
      m.treeForgotten.with(model, tree).inc(units);
    },
  };
}
