/**
 * Builds a policy by name. Every call returns a new instance with fresh state. Names SMG knows
 * but this build does not implement yet fail at start with a message listing what is available.
 */

import type { PolicyName } from "../config/config.ts";
import { ConfigError } from "../core/errors.ts";
import { PassthroughPolicy } from "./passthrough.ts";
import type { Policy, PolicyDeps } from "./policy.ts";
import { RandomPolicy } from "./random.ts";
import { RoundRobinPolicy } from "./round_robin.ts";

const BUILDERS: Partial<Record<PolicyName, (deps: PolicyDeps) => Policy>> = {
  random: (d) => new RandomPolicy(d),
  round_robin: () => new RoundRobinPolicy(),
  passthrough: (d) => new PassthroughPolicy(d),
};

/** Policy names this build can run. */
export const AVAILABLE_POLICIES = Object.keys(BUILDERS) as PolicyName[];

/** A new policy instance; throws ConfigError for a name this build cannot run. */
export function createPolicy(name: PolicyName, deps: PolicyDeps, flag = "--policy"): Policy {
  const build = BUILDERS[name];
  if (!build) {
    throw new ConfigError(
      `${flag}: policy '${name}' is not available in this build yet; available: ${
        AVAILABLE_POLICIES.join(", ")
      }`,
    );
  }
  return build(deps);
}
