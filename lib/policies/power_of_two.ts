/**
 * `power_of_two`: looks at two distinct candidates (which two: below) and sends the request to
 * the one with the lower expected wait (expected_wait.ts), an exact tie going to either with
 * equal chance. In: candidates with load reports and in-flight counts. Out: the winner, credited
 * the request's tokens until its next report.
 *
 * Scored by `--wait-model` (backlog by default; `smg`: SMG's formula). With the backlog, one of
 * the two is the less busy worker of the previous pair once that request is counted (power of
 * two choices with memory, Shah & Prabhakar 2002: one remembered choice does better than a
 * second random one), the other the next worker of a rotating probe (from a seeded random
 * start, skipping the remembered one), so every worker is looked at once every n requests where
 * uniform draws can leave an idle worker unseen for many (BENCHMARKS.md, "Routing quality, round
 * two", measures both); with `smg` both are uniform, as SMG samples them. SMG's formula always
 * uses least_load's default tuning, never the `--least-load-*` flags (as SMG does), and nominal
 * throughput is taken over the pair only; both sampled workers dark → join-shortest-queue on
 * in-flight. Reports older than three load-monitor intervals count as absent (SMG keeps them
 * forever). One candidate is returned without sampling, but is still credited (SMG skips the
 * credit).
 */

import { randomIndex } from "../core/clock.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import {
  backlogScore,
  defaultTuning,
  type ExpectedWaitTuning,
  minExpectedWait,
  promptTokens,
  reportMaxAgeMs,
  requestTokens,
  SinceReportCredit,
} from "./expected_wait.ts";
import type { Policy, PolicyNeeds } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/** The better of two candidates by expected wait. */
export class PowerOfTwoPolicy implements Policy {
  readonly name = "power_of_two";
  readonly needs: PolicyNeeds = { requestText: false, backendLoads: true };
  readonly #deps: PolicyDeps;
  readonly #tuning: ExpectedWaitTuning;
  readonly #maxAgeMs: number;
  readonly #credit = new SinceReportCredit();
  /** With the backlog: one of each pair is the less busy worker of the previous pair. */
  readonly #remember: boolean;
  #memory: string | null = null;
  #memoryAt = -1;
  /** With the backlog: the rotating probe's next position (-1 until the first pair). */
  #probe = -1;

  /** Draws from `deps.random`; reads the load-monitor interval and `--wait-model`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
    this.#tuning = { ...defaultTuning(), waitModel: deps.config.leastLoad.waitModel };
    this.#remember = this.#tuning.waitModel === "backlog";
    this.#maxAgeMs = reportMaxAgeMs(deps.config);
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    const n = candidates.length;
    if (n === 0) return null;
    if (n === 1) return this.#win(candidates[0], request, "single");
    const random = this.#deps.random;
    let i = randomIndex(random, n);
    if (this.#remember && this.#memory !== null) {
      // Candidate lists are usually the same array as last time: try the remembered index first.
      const at = this.#memoryAt;
      const m = candidates[at]?.id === this.#memory
        ? at
        : candidates.findIndex((w) => w.id === this.#memory);
      if (m >= 0) i = m;
    }
    const j = this.#remember ? this.#next(i, n) : (i + 1 + randomIndex(random, n - 1)) % n;
    const pair = [candidates[i], candidates[j]];
    // Nominal throughput and "dark" over the pair only; an exact tie is a fair coin.
    const best = minExpectedWait(pair, {
      tuning: this.#tuning,
      now: this.#deps.now(),
      maxAgeMs: this.#maxAgeMs,
      credit: this.#credit,
      random,
    })!;
    const w = this.#win(pair[best.index], request, best.dark ? "dark_pair" : "pair");
    if (!this.#remember) return w;
    // Remember the pair's worker that is less busy once this request is counted on the winner.
    const loser = pair[1 - best.index];
    const after = backlogScore(w) + promptTokens(request);
    const keep = backlogScore(loser) < after ? 1 - best.index : best.index;
    this.#memory = pair[keep].id;
    this.#memoryAt = keep === 0 ? i : j;
    return w;
  }

  /** The rotating probe's next position among `n`, skipping `i`. */
  #next(i: number, n: number): number {
    if (this.#probe < 0) this.#probe = randomIndex(this.#deps.random, n);
    let j = this.#probe % n;
    if (j === i) j = (j + 1) % n;
    this.#probe = (j + 1) % n;
    return j;
  }

  onWorkerRemoved(workerId: string): void {
    this.#credit.forget(workerId);
  }

  #win<W extends WorkerView>(w: W, request: RouteRequest, branch: string): W {
    this.#credit.add(w, requestTokens(request, this.#tuning.meanPrefillTokens));
    this.#deps.observer?.decision(this.name, branch);
    return w;
  }
}
