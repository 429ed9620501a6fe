/** The routing policies and their factory. */

export type { Policy, PolicyNeeds } from "./policy.ts";
export type { PolicyDeps } from "./policy_deps.ts";
export { AVAILABLE_POLICIES, createPolicy } from "./factory.ts";
export { RandomPolicy } from "./random.ts";
export { RoundRobinPolicy } from "./round_robin.ts";
export { PassthroughPolicy } from "./passthrough.ts";
export { ManualPolicy } from "./manual.ts";
export { STICKY_INFLIGHT_CAP, stickyAppliesTo, StickySessions } from "./sticky.ts";
export { StickyMap, stickyMapKey } from "./sticky_map.ts";
export { LeastLoadPolicy } from "./least_load.ts";
export { PowerOfTwoPolicy } from "./power_of_two.ts";
export { ConsistentHashingPolicy } from "./consistent_hashing.ts";
export { PrefixHashPolicy } from "./prefix_hash.ts";
export { CandidateRing, HashRing } from "./hash_ring.ts";
export { CacheAwarePolicy } from "./cache_aware/cache_aware.ts";
export { BUCKET_ADJUST_INTERVAL_MS, BucketPolicy, type BucketRange } from "./bucket.ts";
