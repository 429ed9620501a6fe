/**
 * `passthrough`: the first eligible worker, in registration order. For a gateway in front of
 * one worker; with more, the others get traffic only while the first is unavailable. Warns once
 * when it sees more than one candidate.
 */

import type { RouteRequest, WorkerView } from "../core/types.ts";
import { NEEDS_NOTHING, type Policy } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/** Always the first candidate. */
export class PassthroughPolicy implements Policy {
  readonly name = "passthrough";
  readonly needs = NEEDS_NOTHING;
  readonly #deps: PolicyDeps;
  #warned = false;

  /** Logs through `deps.log`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
  }

  select<W extends WorkerView>(candidates: readonly W[], _r: RouteRequest): W | null {
    if (candidates.length > 1 && !this.#warned) {
      this.#warned = true;
      this.#deps.log.warn(
        "passthrough is meant for one worker; only the first available worker gets traffic",
        { candidates: candidates.length },
      );
    }
    return candidates[0] ?? null;
  }
}
