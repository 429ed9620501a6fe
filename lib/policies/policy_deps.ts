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

/**
 * What workers say their caches hold (KV-event mode), as a prefix-aware policy reads it: for a
 * prompt's token ids, each worker's leading tokens held (whole blocks), keyed by worker URL.
 */
export interface CacheIndexView {
  /** Nothing reported yet (or all of it gone): the policy falls back to its own records. */
  readonly empty: boolean;
  /** Each worker's leading tokens of `tokens` held; workers holding none are absent. */
  match(tokens: readonly number[]): ReadonlyMap<string, number>;
  /** Whether `url`'s account is current (its event stream is up); if not, the policy's own. */
  reports(url: string): boolean;
}

/**
 * The configuration policies read, and nothing else of the gateway's: each policy its own
 * section, plus the few settings several share (boundaries, the eviction interval, how old a
 * load report may be).
 */
export type PolicyConfig = Pick<
  GatewayConfig,
  | "cacheAware"
  | "leastLoad"
  | "prefixHash"
  | "manual"
  | "cacheBoundaries"
  | "evictionIntervalSecs"
  | "routingKeyOverride"
  | "loadMonitor"
>;

/** What a policy factory hands every policy. */
export interface PolicyDeps {
  /** Seeded randomness. */
  random: Random;
  /** Clock reading in ms (the same clock as `WorkerView.loadAt`). */
  now: () => number;
  /** Logger (module `policy`). */
  log: Logger;
  /** The policies' part of the configuration; a policy reads its own section. */
  config: PolicyConfig;
  /** Decision reporting (default: none). */
  observer?: PolicyObserver;
  /** Where shared state registers for the mesh (default: none, nothing shared). */
  replicas?: PolicyReplicas;
  /** Which of the router's policies this is, for tree sync (default `main`; PD legs). */
  role?: TreeRole;
  /** The KV-event index of a model, when its workers publish events (default: none). */
  cacheIndex?: (model: string) => CacheIndexView | null;
}
