/**
 * Builds a policy by name, from a table with a builder for every name SMG knows. Every call
 * returns a new instance with fresh state. With `--routing-key-override` the built policy is wrapped in sticky sessions (sticky.ts).
 */

import type { PolicyName } from "../config/config.ts";
import { PassthroughPolicy } from "./passthrough.ts";
import type { Policy } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";
import { RandomPolicy } from "./random.ts";
import { RoundRobinPolicy } from "./round_robin.ts";
import { ManualPolicy } from "./manual.ts";
import { stickyAppliesTo, StickySessions } from "./sticky.ts";
import { LeastLoadPolicy } from "./least_load.ts";
import { PowerOfTwoPolicy } from "./power_of_two.ts";
import { ConsistentHashingPolicy } from "./consistent_hashing.ts";
import { PrefixHashPolicy } from "./prefix_hash.ts";
import { CacheAwarePolicy } from "./cache_aware/cache_aware.ts";
import { BucketPolicy } from "./bucket.ts";

/** One builder per policy name: the type checker refuses a name without one. */
const BUILDERS: Record<PolicyName, (deps: PolicyDeps) => Policy> = {
  random: (d) => new RandomPolicy(d),
  round_robin: () => new RoundRobinPolicy(),
  passthrough: (d) => new PassthroughPolicy(d),
  manual: (d) => new ManualPolicy(d),
  least_load: (d) => new LeastLoadPolicy(d),
  power_of_two: (d) => new PowerOfTwoPolicy(d),
  consistent_hashing: (d) => new ConsistentHashingPolicy(d),
  prefix_hash: (d) => new PrefixHashPolicy(d),
  cache_aware: (d) => new CacheAwarePolicy(d),
  bucket: (d) => new BucketPolicy(d),
};

/** Policy names this build can run. */
export const AVAILABLE_POLICIES = Object.keys(BUILDERS) as PolicyName[];

/** A new policy instance (names come validated: the flags and `normalise` admit SMG's only). */
export function createPolicy(name: PolicyName, deps: PolicyDeps): Policy {
  const policy = BUILDERS[name](deps);
  // Sticky sessions wrap every policy but the key-native ones (`stickyAppliesTo`).
  return deps.config.routingKeyOverride && stickyAppliesTo(name)
    ? new StickySessions(policy, deps)
    : policy;
}
