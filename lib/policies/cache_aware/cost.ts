/**
 * cache_aware's cost scoring (`--cache-aware-scoring cost`): every candidate scored, in tokens, by
 * what placing the request there adds to the fleet's waiting: twice its uncached share of the
 * prompt (its own prefill, and the wait it adds for whoever arrives there next; the tree's match
 * for that worker, a peer's placement if deeper, counted in whole blocks: an engine reuses its
 * cache a block at a time, so a match saves its full blocks however short a share of the prompt
 * they are; `--cache-threshold` is SMG scoring's gate, not used here), plus the worker's prefill
 * backlog (`backlogScore`, what it waits behind), as Dynamo's KV router costs overlap against
 * load, plus `--cache-aware-work-weight` (0.1) times the uncached work the worker was sent over
 * the last `--cache-aware-work-horizon-secs` (30 s, decayed) above the least sent candidate's.
 *
 * That last term is what the backlog cannot see: a decision is sticky. A conversation, or every
 * new conversation of a tenant whose system prompt a worker holds, keeps coming back to where
 * its prefix is, so the worker that holds a popular prefix draws more and more work and cache
 * turnover while its backlog, drained between arrivals, looks no worse than anyone's; its cache
 * then evicts the conversations it holds. With the term, a new branch off a shared prefix of S
 * tokens goes where recent work is lightest once the holder's recent work exceeds the lightest's
 * by 20 S (at weight 0.1), while a conversation stays until the excess reaches 20 times its
 * whole history.
 * Measured in BENCHMARKS.md ("Routing where tokens are not 4 characters long and caches are
 * small"): without it, a conversation trace piled 2.4× the mean work on one worker and hit less
 * than plain conversation affinity.
 *
 * The cheapest wins (exact ties uniformly). A worker holding the prompt keeps it unless its
 * backlog and recent work exceed twice the work a cold prefill elsewhere would add, so hot
 * prefixes replicate when, and only when, it pays. Equal costs (a miss on an idle fleet, say) go
 * to the worker holding less of the tree, then with fewer requests in flight, so new prefixes
 * spread over the caches instead of piling where chance put the first ones.
 */

import type { Random } from "../../core/clock.ts";
import type { WorkerView } from "../../core/types.ts";
import { argminUniform, backlogScore } from "../expected_wait.ts";
import type { PlacementMatch } from "./shared_paths.ts";
import type { PrefixMatch } from "./tree_types.ts";

/** The cheapest candidate, with every candidate's counted match and the deepest. */
export interface CostPick {
  /** Index of the cheapest candidate. */
  index: number;
  /** Units of the prompt each candidate counts as cached (whole blocks). */
  matched: number[];
  /** The largest of `matched`. */
  deepest: number;
}

const NO_DEPTHS: ReadonlyMap<string, number> = new Map();

/**
 * Scores `candidates` for a prompt the tree matched as `tree` (a peer's placement `remote`),
 * `perToken(w)` units a token on worker `w`, matches counted in whole blocks of `block` units,
 * `heldBy` a worker's share of the tree in units, and `work.weight` tokens of cost per token of
 * recent uncached work (`work.of`) above the least's; see the module comment.
 */
export function cheapest(
  candidates: readonly WorkerView[],
  tree: PrefixMatch,
  remote: PlacementMatch | null,
  perToken: (w: WorkerView) => number,
  block: number,
  heldBy: (url: string) => number,
  random: Random,
  work: { weight: number; of: (w: WorkerView) => number } | null = null,
): CostPick {
  const total = tree.total;
  const recent = work === null || work.weight === 0 ? null : candidates.map(work.of);
  let leastWork = Infinity;
  if (recent !== null) { for (const x of recent) if (x < leastWork) leastWork = x; }
  const held = candidates.map((w) => heldBy(w.url));
  let most = 0;
  for (const h of held) if (h > most) most = h;
  const depths = tree.matched > 0 ? tree.depths() : NO_DEPTHS;
  const matched = new Array<number>(candidates.length);
  const costs = new Array<number>(candidates.length);
  let deepest = 0;
  for (let i = 0; i < candidates.length; i++) {
    const w = candidates[i];
    let m = depths.get(w.url) ?? 0;
    if (remote !== null && remote.depth > m && remote.tenants.includes(w.url)) m = remote.depth;
    m -= m % block;
    matched[i] = m;
    if (m > deepest) deepest = m;
    // The in-flight term and the tree share are both below 1: they order ties.
    const share = most === 0 ? 0 : held[i] / most;
    costs[i] = 2 * Math.ceil((total - m) / perToken(w)) + Math.floor(backlogScore(w)) +
      (recent === null ? 0 : Math.floor(work!.weight * (recent[i] - leastWork))) +
      (share * 0.999 + w.inFlight / (w.inFlight + 1)) / 2;
  }
  return { index: argminUniform(costs, random), matched, deepest };
}
