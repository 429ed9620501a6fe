/**
 * Eligibility and the policy's pick for one attempt: workers that are ready, not vetoed, with a
 * breaker that lets requests through, and not failed by this request yet; then the policy. An
 * empty pool answers 503 with `Retry-After` (the load-monitor interval when every worker is
 * overloaded); on a retry it answers null, so the last failure is what the client gets.
 */

import type { Clock } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { RouteRequest, SelectionNote } from "../core/types.ts";
import type { CounterSeries } from "../metrics/fast.ts";
import { promptTokens } from "../policies/expected_wait.ts";
import type { LastDecision, Policy } from "../policies/policy.ts";
import type { Worker } from "../workers/worker.ts";

/** What selection reads besides the request: built once per proxy. */
export interface SelectEnv {
  /** Breaker and overload readings. */
  clock: Clock;
  /** `smg_worker_overload_shed_total{stage="selection"}`. */
  shed: CounterSeries;
  /** `Retry-After` when every worker is overloaded (the load-monitor interval, s). */
  overloadedRetryAfter: number;
  /** Where the policies' observer keeps its last branch, noted on the pick (absent: not). */
  lastDecision?: LastDecision;
}

/** One selection: the pool, the request and who picks. */
export interface Selection {
  /** The request's candidate workers. */
  candidates: readonly Worker[];
  /** Workers this request failed on (not eligible). */
  failed: ReadonlySet<string>;
  /** The request. */
  rr: RouteRequest;
  /** Whether an attempt already failed (an empty pool is then null, not an error). */
  retrying: boolean;
  /** The policy that picks. */
  policy: Policy;
  /** What the policy tells about its pick (`newNote`). */
  note: SelectionNote;
  /** The error code of a 503 (default `no_available_workers`). */
  code?: string;
}

/** The worker for this attempt, or null on a retry with nothing left. */
export function selectWorker(env: SelectEnv, s: Selection): Worker | null {
  const { candidates, failed, rr, retrying, policy, note } = s;
  const code = s.code ?? "no_available_workers";
  const now = env.clock.now();
  let eligible: Worker[] = [];
  let stalled: Worker[] | null = null;
  let overloaded = 0;
  for (const w of candidates) {
    if (failed.has(w.id)) continue;
    if (w.available(now)) eligible.push(w);
    else if (w.overloaded) overloaded++;
    else if (w.usable(now)) (stalled ??= []).push(w);
  }
  // A stalled worker is left out while others can serve; with none, it is tried, not refused.
  if (eligible.length === 0 && stalled !== null) eligible = stalled;
  if (eligible.length === 0) {
    if (retrying) return null;
    if (overloaded > 0 && overloaded === candidates.length) {
      env.shed.inc();
      throw new GatewayError(503, code, "every worker for this model is overloaded", {
        retryAfter: env.overloadedRetryAfter,
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
  note.eligible = eligible.length;
  const last = env.lastDecision;
  if (last) last.branch = null;
  const worker = policy.select(eligible, rr, note);
  if (last?.branch) note.branch ??= last.branch;
  if (!worker) {
    if (retrying) return null;
    throw new GatewayError(503, code, `policy ${policy.name} found no worker`, { retryAfter: 1 });
  }
  return worker;
}

/** The error for a model no worker could ever serve: 503 with none registered, else 404. */
export function noCandidates(registered: number, rr: RouteRequest): GatewayError {
  if (registered === 0) {
    return new GatewayError(503, "no_available_workers", "no workers are registered", {
      retryAfter: 1,
    });
  }
  return new GatewayError(404, "model_not_found", `no worker serves model '${rr.model}'`, {
    param: "model",
  });
}

/** A fresh note for one leg's selection: the whole prompt to prefill, no cache prediction. */
export function newNote(rr: RouteRequest, prefills = true, policy?: string): SelectionNote {
  return { prefillTokens: prefills ? promptTokens(rr) : 0, predictedCached: null, policy };
}
