/**
 * The per-worker gauges (health, active routing keys, breaker state, pool size, overload,
 * characters per token) and the models' characters per token, set from the registry and the
 * learned ratios just before a scrape renders them: a worker gone since the last scrape leaves
 * no stale series, as each gauge is reset first.
 */

import type { Metrics } from "../metrics/metrics.ts";
import { BREAKER_GAUGE } from "../workers/circuit_breaker.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { TextRatios } from "../workers/text_ratios.ts";

/** Resets the per-worker gauges and sets them from `registry` and `ratios` as of `now`. */
export function refreshWorkerGauges(
  m: Metrics,
  registry: WorkerRegistry,
  now: number,
  ratios?: TextRatios,
): void {
  m.workerCharsPerToken.reset();
  m.modelCharsPerToken.reset();
  for (const r of ratios?.models() ?? []) {
    m.modelCharsPerToken.with(r.model, r.source).set(r.charsPerToken);
  }
  m.workerHealth.reset();
  m.routingKeysActive.reset();
  m.cbState.reset();
  m.poolSize.reset();
  m.overloaded.reset();
  for (const w of registry.all()) {
    m.workerHealth.with(w.url).set(w.status === "ready" ? 1 : 0);
    m.routingKeysActive.with(w.url).set(w.activeKeys);
    m.cbState.with(w.url).set(BREAKER_GAUGE[w.breaker.state(now)]);
    const cpt = w.charsPerToken;
    if (cpt !== null) m.workerCharsPerToken.with(w.url).set(cpt);
    for (const model of w.models ?? ["unknown"]) {
      m.poolSize.with(w.type, w.connection, model).inc();
      if (w.overloaded) m.overloaded.with(model).inc();
    }
  }
}
