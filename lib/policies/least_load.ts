/**
 * `least_load`: the candidate with the lowest expected wait (see expected_wait.ts: by default
 * the prefill backlog this gateway tracks, `--wait-model smg` SMG's formula), ties broken
 * uniformly at random. In: candidates with their backlog, load reports and in-flight counts,
 * the request's token count. Out: the winner (SMG's formula credits it the request's tokens
 * until its next report; the backlog counts them until the first token).
 *
 * With `--least-load-max-waiting-requests` N > 0, a worker whose fresh report shows waiting +
 * credited requests ≥ N is skipped; when every candidate is skipped the request fails with 503
 * `no_available_workers` and `Retry-After` = the load-monitor interval, whatever the connection
 * mode (SMG answers gRPC with 404 `model_not_found`). Workers without a fresh report are
 * never skipped.
 *
 * Departures from SMG: reports older than three load-monitor intervals count as absent;
 * the one-candidate short-circuit still credits the worker, so its tally is right when other
 * workers become eligible again before its next report.
 */

import type { LeastLoadConfig } from "../config/config.ts";
import { GatewayError } from "../core/errors.ts";
import type { LoadSnapshot, RouteRequest, WorkerView } from "../core/types.ts";
import {
  type ExpectedWaitTuning,
  minExpectedWait,
  reportMaxAgeMs,
  requestTokens,
  sanitizeTuning,
  SinceReportCredit,
} from "./expected_wait.ts";
import type { Policy, PolicyNeeds } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/** Lowest expected wait, with an optional waiting-queue cap. */
export class LeastLoadPolicy implements Policy {
  readonly name = "least_load";
  readonly needs: PolicyNeeds = { requestText: false, backendLoads: true };
  readonly #deps: PolicyDeps;
  readonly #tuning: ExpectedWaitTuning;
  readonly #cap: number;
  readonly #maxAgeMs: number;
  readonly #credit = new SinceReportCredit();

  /** Reads `deps.config.leastLoad` (or `tuning` when given) and the load-monitor interval. */
  constructor(deps: PolicyDeps, tuning: LeastLoadConfig = deps.config.leastLoad) {
    this.#deps = deps;
    this.#tuning = sanitizeTuning(tuning);
    this.#cap = Math.max(0, Math.floor(tuning.maxWaitingRequests || 0));
    this.#maxAgeMs = reportMaxAgeMs(deps.config);
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    if (candidates.length === 0) return null;
    if (candidates.length === 1 && this.#cap === 0) {
      return this.#win(candidates[0], request, "single");
    }
    const best = minExpectedWait(candidates, {
      tuning: this.#tuning,
      now: this.#deps.now(),
      maxAgeMs: this.#maxAgeMs,
      credit: this.#credit,
      random: this.#deps.random,
      skip: this.#cap > 0 ? this.#atCap : undefined,
    });
    if (best === null) {
      this.#deps.observer?.decision(this.name, "queue_cap");
      const secs = Math.max(1, Math.ceil(this.#deps.config.loadMonitor.intervalSecs));
      throw new GatewayError(
        503,
        "no_available_workers",
        `every worker is at the waiting-queue cap (${this.#cap})`,
        { retryAfter: secs },
      );
    }
    const w = candidates[best.index];
    const log = this.#deps.log;
    if (log.enabled("debug")) {
      log.debug("least_load pick", {
        worker: w.url,
        score: best.score,
        inFlight: w.inFlight,
        candidates: candidates.length,
        skipped: best.skipped,
      });
    }
    return this.#win(w, request, best.dark ? "dark_fleet" : "scored");
  }

  onWorkerRemoved(workerId: string): void {
    this.#credit.forget(workerId);
  }

  /** Whether the worker's waiting queue plus what we sent since its report reaches the cap. */
  readonly #atCap = (w: WorkerView, load: LoadSnapshot): boolean =>
    Math.max(0, load.waitingRequests) + this.#credit.requests(w) >= this.#cap;

  #win<W extends WorkerView>(w: W, request: RouteRequest, branch: string): W {
    this.#credit.add(w, requestTokens(request, this.#tuning.meanPrefillTokens));
    this.#deps.observer?.decision(this.name, branch);
    return w;
  }
}
