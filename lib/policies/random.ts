/** `random`: a uniform choice among the eligible workers; no state. */

import { randomIndex } from "../core/clock.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import { NEEDS_NOTHING, type Policy } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/** Uniform random over the candidates. */
export class RandomPolicy implements Policy {
  readonly name = "random";
  readonly needs = NEEDS_NOTHING;
  readonly #deps: PolicyDeps;

  /** Draws from `deps.random`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
  }

  select<W extends WorkerView>(candidates: readonly W[], _r: RouteRequest): W | null {
    if (candidates.length === 0) return null;
    return candidates[randomIndex(this.#deps.random, candidates.length)];
  }
}
