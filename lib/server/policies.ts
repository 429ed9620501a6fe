/**
 * The policies the composition root builds: the default (`--policy`), the per-model map that
 * follows the workers' models and removals, and PD's two legs (`--prefill-policy`,
 * `--decode-policy`, each defaulting to `--policy`), all with the shared policy deps.
 */

import type { GatewayConfig } from "../config/config.ts";
import { PolicyRegistry } from "../policies/registry.ts";
import type { PolicyReplicas } from "../policies/replicas.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import { createPolicy } from "../policies/mod.ts";
import type { PolicyDeps } from "../policies/policy_deps.ts";
import type { PdPolicies } from "../proxy/proxy.ts";

/** The prefill and decode policies with `--pd-disaggregation`, else undefined. */
function createPdPolicies(
  config: GatewayConfig,
  deps: PolicyDeps,
): PdPolicies | undefined {
  if (!config.pd.enabled) return undefined;
  return {
    prefill: createPolicy(
      config.pd.prefillPolicy ?? config.policy,
      { ...deps, role: "prefill" },
    ),
    decode: createPolicy(
      config.pd.decodePolicy ?? config.policy,
      { ...deps, role: "decode" },
    ),
  };
}

/**
 * The policies: the default (`--policy`), the per-model map that follows the workers' models and
 * removals, and PD's two legs; the shared trees and pins registered for the mesh.
 */
export function buildPolicies(
  config: GatewayConfig,
  deps: PolicyDeps & { replicas: PolicyReplicas },
  registry: WorkerRegistry,
): { policies: PolicyRegistry; pd: PdPolicies | undefined } {
  const policies = new PolicyRegistry(
    createPolicy(config.policy, deps),
    (name) => createPolicy(name, deps),
    deps.log,
  );
  deps.replicas.mainFor = (model) => policies.forModel(model);
  policies.onRetired = (p) => deps.replicas.remove(p);
  const pd = createPdPolicies(config, deps);
  policies.follow((l) => registry.subscribe(l), pd ? [pd.prefill, pd.decode] : []);
  return { policies, pd };
}
