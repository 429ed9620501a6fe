/** The routing policies and their factory. */

export type { Policy, PolicyDeps, PolicyNeeds } from "./policy.ts";
export { AVAILABLE_POLICIES, createPolicy } from "./factory.ts";
export { RandomPolicy } from "./random.ts";
export { RoundRobinPolicy } from "./round_robin.ts";
export { PassthroughPolicy } from "./passthrough.ts";
