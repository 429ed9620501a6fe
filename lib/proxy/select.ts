/**
 * Eligibility and the policy's pick for one attempt: workers that are ready, not vetoed, with a
 * breaker that lets requests through, and not failed by this request yet; then the policy. An
 * empty pool answers 503 with `Retry-After` (the load-monitor interval when every worker is
 * overloaded); on a retry it answers null, so the last failure is what the client gets.
 */

import { GatewayError } from "../core/errors.ts";
import type { RouteRequest } from "../core/types.ts";
import type { Policy } from "../policies/policy.ts";
import type { Worker } from "../workers/worker.ts";
import type { ProxyDeps } from "./proxy.ts";

/** The worker for this attempt, or null on a retry with nothing left. */
export function selectWorker(
  d: ProxyDeps,
  candidates: readonly Worker[],
  failed: ReadonlySet<string>,
  rr: RouteRequest,
  retrying: boolean,
  policy: Policy,
  code = "no_available_workers",
): Worker | null {
  const now = d.clock.now();
  const eligible: Worker[] = [];
  let overloaded = 0;
  for (const w of candidates) {
    if (failed.has(w.id)) continue;
    if (w.available(now)) eligible.push(w);
    else if (w.overloaded) overloaded++;
  }
  if (eligible.length === 0) {
    if (retrying) return null;
    if (overloaded > 0 && overloaded === candidates.length) {
      d.metrics.overloadShed.with("selection").inc();
      throw new GatewayError(503, code, "every worker for this model is overloaded", {
        retryAfter: d.config.loadMonitor.intervalSecs,
      });
    }
    throw new GatewayError(
      503,
      code,
      `all ${candidates.length} ${candidates[0]?.type ?? "regular"} workers for model '${
        rr.model ?? "any"
      }' are unavailable (unhealthy or circuit open)`,
      { retryAfter: 1 },
    );
  }
  const worker = policy.select(eligible, rr);
  if (!worker) {
    if (retrying) return null;
    throw new GatewayError(503, code, `policy ${policy.name} found no worker`, { retryAfter: 1 });
  }
  return worker;
}

/** The error for a model no worker could ever serve: 503 with none registered, else 404. */
export function noCandidates(d: ProxyDeps, rr: RouteRequest): GatewayError {
  if (d.registry.size === 0) {
    return new GatewayError(503, "no_available_workers", "no workers are registered", {
      retryAfter: 1,
    });
  }
  return new GatewayError(404, "model_not_found", `no worker serves model '${rr.model}'`, {
    param: "model",
  });
}
