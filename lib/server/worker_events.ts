/**
 * The composition root's own duties on the worker registry's events (the features subscribe to
 * them themselves).
 */

import type { Logger } from "../core/log.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { GrpcWorkers } from "../proxy/grpc/workers.ts";
import type { HealthChecker } from "../workers/health.ts";
import type { WorkerManager } from "../workers/manager.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

/**
 * What the root itself does on the workers' events: a new worker probed at once, a removed one's
 * gRPC channels closed and its gauge zeroed, breaker transitions counted and logged, a failed
 * worker removed with `--remove-unhealthy-workers` (a mesh import is its owner's to remove).
 */
export function followWorkers(
  registry: WorkerRegistry,
  d: {
    checker: HealthChecker;
    manager: WorkerManager;
    grpcWorkers: GrpcWorkers;
    metrics: Metrics;
    log: Logger;
    removeUnhealthy: boolean;
  },
): void {
  registry.subscribe((e) => {
    if (e.kind === "added") d.checker.poke();
    if (e.kind === "removed") {
      d.grpcWorkers.forget(e.worker.url);
      d.metrics.workerActive.with(e.worker.url).set(0);
    }
    if (e.kind === "breaker") {
      const { worker: w, from, to } = e;
      d.metrics.cbTransitions.with(w.url, from, to).inc();
      d.log.warn("circuit breaker changed", { module: "breaker", worker: w.url, from, to });
    }
    if (e.kind === "status" && e.to === "failed" && d.removeUnhealthy) {
      if (e.worker.origin === "local") d.manager.remove(e.worker.id);
    }
  });
}
