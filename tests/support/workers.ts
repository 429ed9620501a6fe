/**
 * A registry and a worker manager over SMG's default health and breaker settings, for tests
 * that need real `Worker` objects without a server.
 */

import { defaultConfig } from "../../lib/config/config.ts";
import type { Clock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { WorkerManager, type WorkerManagerDeps } from "../../lib/workers/manager.ts";
import { WorkerRegistry } from "../../lib/workers/registry.ts";

/** A fresh registry and a manager adding to it; `over` replaces any manager dependency. */
export function workerSetup(clock: Clock, over: Partial<WorkerManagerDeps> = {}) {
  const registry = over.registry ?? new WorkerRegistry();
  const manager = new WorkerManager({
    registry,
    health: defaultConfig().health,
    circuitBreaker: defaultConfig().circuitBreaker,
    clock,
    log: silentLogger,
    ...over,
  });
  return { registry, manager };
}
