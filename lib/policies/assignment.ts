/**
 * `--assignment-mode` placement for `manual` and sticky sessions: where a key that is not pinned
 * (or a keyless request) goes. In: a non-empty candidate list and a seeded random source; out:
 * one candidate. `delegate` means "ask the configured policy" and is resolved by the caller;
 * here it is min_load (what SMG's manual policy does with it).
 */

import type { AssignmentMode } from "../config/config.ts";
import { type Random, randomIndex } from "../core/clock.ts";
import type { WorkerView } from "../core/types.ts";

/**
 * A candidate by `mode`: `random` uniform; `min_load` (and `delegate`) the fewest requests in
 * flight; `min_group` the fewest distinct sticky keys in flight. Ties are broken uniformly at
 * random. `candidates` must not be empty.
 */
export function assignWorker<W extends WorkerView>(
  mode: AssignmentMode,
  candidates: readonly W[],
  random: Random,
): W {
  if (mode === "random") return candidates[randomIndex(random, candidates.length)];
  const score = mode === "min_group" ? (w: W) => w.activeKeys : (w: W) => w.inFlight;
  let best = candidates[0];
  let bestScore = score(best);
  let ties = 1;
  for (let i = 1; i < candidates.length; i++) {
    const c = candidates[i];
    const s = score(c);
    if (s < bestScore) {
      best = c;
      bestScore = s;
      ties = 1;
    } else if (s === bestScore && randomIndex(random, ++ties) === 0) {
      best = c; // reservoir sampling: each tied candidate ends up chosen with probability 1/ties
    }
  }
  return best;
}
