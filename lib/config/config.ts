/**
 * The gateway's configuration as the rest of the code imports it: the `GatewayConfig` type and
 * its parts (`types.ts`), and the defaults its flag declarations give (`flags.ts`).
 */

export type * from "./types.ts";
export { ASSIGNMENT_MODES, CACHE_AWARE_SCORINGS, POLICY_NAMES, WAIT_MODELS } from "./types.ts";
export { defaultConfig } from "./flags.ts";
