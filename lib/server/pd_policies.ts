/**
 * PD disaggregation's two policies (`--prefill-policy`, `--decode-policy`, each defaulting to
 * `--policy`), built with the shared policy deps and told when a worker of either leg is removed.
 */

import type { GatewayConfig } from "../config/config.ts";
import { createPolicy } from "../policies/mod.ts";
import type { PolicyDeps } from "../policies/policy_deps.ts";
import type { PdPolicies } from "../proxy/proxy.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

/** The prefill and decode policies with `--pd-disaggregation`, else undefined. */
export function createPdPolicies(
  config: GatewayConfig,
  deps: PolicyDeps,
  registry: WorkerRegistry,
): PdPolicies | undefined {
  if (!config.pd.enabled) return undefined;
  const pd = {
    prefill: createPolicy(
      config.pd.prefillPolicy ?? config.policy,
      { ...deps, role: "prefill" },
    ),
    decode: createPolicy(
      config.pd.decodePolicy ?? config.policy,
      { ...deps, role: "decode" },
    ),
  };
  registry.subscribe((e) => {
    if (e.kind !== "removed") return;
    pd.prefill.onWorkerRemoved?.(e.worker.id);
    pd.decode.onWorkerRemoved?.(e.worker.id);
  });
  return pd;
}
