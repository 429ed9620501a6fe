/**
 * PD disaggregation's two policies (`--prefill-policy`, `--decode-policy`, each defaulting to
 * `--policy`), built with the shared policy deps (the policy registry tells both of removals).
 */

import type { GatewayConfig } from "../config/config.ts";
import { createPolicy } from "../policies/mod.ts";
import type { PolicyDeps } from "../policies/policy_deps.ts";
import type { PdPolicies } from "../proxy/proxy.ts";

/** The prefill and decode policies with `--pd-disaggregation`, else undefined. */
export function createPdPolicies(
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
