/**
 * The per-worker gauges (health, active routing keys, breaker state, pool size, overload), set
 * from the registry just before a scrape renders them: a worker gone since the last scrape leaves
 * no stale series, as each gauge is reset first.
 */

import type { Metrics } from "../metrics/metrics.ts";
import { BREAKER_GAUGE } from "../workers/circuit_breaker.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

/** Resets the per-worker gauges and sets them from `registry` as of `now`. */
export function refreshWorkerGauges(m: Metrics, registry: WorkerRegistry, now: number): void {
  m.workerHealth.reset();
  m.routingKeysActive.reset();
  m.cbState.reset();
  m.poolSize.reset();
  m.overloaded.reset();
  for (const w of registry.all()) {
    m.workerHealth.with(w.url).set(w.status === "ready" ? 1 : 0);
    m.routingKeysActive.with(w.url).set(w.activeKeys);
    m.cbState.with(w.url).set(BREAKER_GAUGE[w.breaker.state(now)]);
    for (const model of w.models ?? ["unknown"]) {
      m.poolSize.with(w.type, w.connection, model).inc();
      if (w.overloaded) m.overloaded.with(model).inc();
    }
  }
}
