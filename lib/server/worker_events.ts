/**
 * The composition root's own duties toward workers: registering those the configuration names at
 * start, and what it does on the worker registry's events (the features subscribe to them
 * themselves).
 */

import type { GatewayConfig } from "../config/config.ts";
import { EgressRefusedError } from "../core/egress.ts";
import { ConfigError } from "../core/errors.ts";
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

/**
 * Registers the workers the configuration names (`--worker-urls`, PD's `--prefill` and
 * `--decode`); a host the egress policy refuses is a `ConfigError`.
 */
export function addConfiguredWorkers(c: GatewayConfig, manager: WorkerManager): void {
  const common = { apiKey: c.apiKey, disableHealthCheck: c.health.disabled };
  try {
    for (const url of c.workerUrls) manager.add({ url, ...common });
    for (const p of c.pd.prefill) {
      manager.add({ url: p.url, workerType: "prefill", bootstrapPort: p.bootstrapPort, ...common });
    }
    for (const url of c.pd.decode) manager.add({ url, workerType: "decode", ...common });
  } catch (e) {
    // validate.ts checked the configured ports; a port 0 is known only now, once bound.
    if (e instanceof EgressRefusedError) throw new ConfigError(e.message);
    throw e;
  }
}
