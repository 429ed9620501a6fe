/**
 * What a policy is built with (`PolicyDeps`): seeded randomness, the clock, a logger, the
 * configuration, where decisions are reported and where shared state registers for the mesh.
 * Apart from the `Policy` interface (`policy.ts`) because the registry of shared state
 * (`replicas.ts`) names policies itself.
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Random } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { PolicyObserver } from "./policy.ts";
import type { PolicyReplicas, TreeRole } from "./replicas.ts";

/** What a policy factory hands every policy. */
export interface PolicyDeps {
  /** Seeded randomness. */
  random: Random;
  /** Clock reading in ms (the same clock as `WorkerView.loadAt`). */
  now: () => number;
  /** Logger (module `policy`). */
  log: Logger;
  /** The gateway configuration; a policy reads its own section. */
  config: GatewayConfig;
  /** Decision reporting (default: none). */
  observer?: PolicyObserver;
  /** Where shared state registers for the mesh (default: none, nothing shared). */
  replicas?: PolicyReplicas;
  /** Which of the router's policies this is, for tree sync (default `main`; PD legs). */
  role?: TreeRole;
}
