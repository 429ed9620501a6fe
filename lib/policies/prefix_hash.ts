/**
 * `prefix_hash`: requests sharing a prompt prefix go to the same
 * worker, found on the hash ring (`hash_ring.ts`) by a hash of the prefix, unless that worker
 * is too busy; then to the least loaded candidate.
 *
 * Key candidates, tried in order (deepest first):
 * 1. `request.routingKey` (configured routing-key headers only, as in SMG): one key.
 * 2. Token ids: with `--cache-boundaries`, one key per boundary b ≤ token count, deepest first,
 *    over tokens[0..b]; else one key over the first `--prefix-token-count` tokens.
 * 3. Text: the same at the model's characters per token (`RouteRequest.charsPerToken`, learned
 *    from the answers; held at a half-power-of-two step that moves only when the estimate really
 *    does, `SteadyRatios`, so keys do not move with its wobble), in code points, so a cut never
 *    splits one. SMG counts 4 characters a token, the default until answers arrive.
 * 4. Nothing to hash → the least loaded candidate (`no_routing_key`).
 *
 * A ring worker is accepted when `loadOk`: a worker is too busy only when its in-flight count
 * exceeds BOTH avg × `--prefix-hash-load-factor` and avg + `--prefix-hash-balance-abs-threshold`,
 * with avg = (total in flight + 1) / candidates (the +1 is the incoming request). A busy deep
 * target retries the shallower keys; if all are busy, the least loaded candidate passing
 * `loadOk` wins (it always does: the minimum is below the average), else the deepest target.
 *
 * Prefix hashes are computed incrementally in one pass over the deepest prefix, so boundaries
 * cost O(deepest depth), not the sum of depths. Unlike SMG, the policy declares that it
 * needs request text (SMG's says no, so its HTTP PD routing had no prefix to hash).
 * Branches: no_healthy_workers, no_routing_key, ring_hit, load_balance_walk, fallback_least_load.
 */

import type { PrefixHashConfig } from "../config/config.ts";
import { DEFAULT_CHARS_PER_TOKEN, SteadyRatios } from "../core/chars_per_token.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import { CandidateRing, hash53, PrefixHasher } from "./hash_ring.ts";
import type { Policy, PolicyNeeds } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

// Separate hash domains, so a routing key never collides with a prompt by construction.
const SEED_KEY = 0x6b6579;
const SEED_TOKENS = 0x746f6b;
const SEED_TEXT = 0x747874;

/** One ring key: its prefix depth in tokens (0 = routing key or fixed depth) and its hash. */
export interface PrefixKey {
  /** Boundary depth in tokens, 0 for a routing key or the fixed-depth key. */
  depth: number;
  /** `hash53`-style ring position. */
  hash: number;
}

/** What key derivation reads from the configuration. */
export interface PrefixKeyOptions {
  /** Tokens hashed at fixed depth (`--prefix-token-count`). */
  prefixTokenCount: number;
  /** Ascending token depths (`--cache-boundaries`); empty for fixed depth. */
  boundaries: readonly number[];
}

/**
 * The request's ring keys, deepest first; empty when there is nothing to hash. Text is cut at
 * `charsPerToken` characters a token (default 4).
 */
export function prefixKeys(
  request: RouteRequest,
  opts: PrefixKeyOptions,
  charsPerToken = DEFAULT_CHARS_PER_TOKEN,
): PrefixKey[] {
  if (request.routingKey) return [{ depth: 0, hash: hash53(request.routingKey, SEED_KEY) }];
  const tokens = request.tokens;
  if (tokens && tokens.length > 0) return tokenKeys(tokens, opts);
  if (request.text.length > 0) return textKeys(request.text, opts, charsPerToken);
  return [];
}

function tokenKeys(tokens: readonly number[], opts: PrefixKeyOptions): PrefixKey[] {
  const h = new PrefixHasher(SEED_TOKENS);
  const out: PrefixKey[] = [];
  let i = 0;
  for (const b of opts.boundaries) {
    if (b > tokens.length) break;
    for (; i < b; i++) h.push(tokens[i]);
    out.push({ depth: b, hash: h.digest() });
  }
  if (out.length > 0) return out.reverse();
  const end = Math.min(tokens.length, opts.prefixTokenCount);
  for (; i < end; i++) h.push(tokens[i]);
  return [{ depth: 0, hash: h.digest() }];
}

function textKeys(text: string, opts: PrefixKeyOptions, charsPerToken: number): PrefixKey[] {
  const cut = (tokens: number) => Math.round(tokens * charsPerToken);
  const out: PrefixKey[] = [];
  const bounds = opts.boundaries;
  if (bounds.length > 0) {
    const h = new PrefixHasher(SEED_TEXT);
    let chars = 0;
    let next = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0xdc00 || c > 0xdfff) { // a code point starts here (not a low surrogate)
        if (chars === cut(bounds[next])) {
          out.push({ depth: bounds[next], hash: h.digest() });
          if (++next === bounds.length) break;
        }
        chars++;
      }
      h.push(c);
    }
    if (next < bounds.length && chars === cut(bounds[next])) {
      out.push({ depth: bounds[next], hash: h.digest() });
    }
    if (out.length > 0) return out.reverse();
  }
  const h = new PrefixHasher(SEED_TEXT);
  const budget = cut(opts.prefixTokenCount);
  let chars = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0xdc00 || c > 0xdfff) && chars++ === budget) break;
    h.push(c);
  }
  return [{ depth: 0, hash: h.digest() }];
}

/**
 * Whether a worker with `load` in flight may take one more request, given `total` in flight
 * over `n` candidates: always when total is 0, else iff load ≤ max(avg × factor, avg + abs)
 * with avg = (total + 1) / n.
 */
export function loadOk(
  load: number,
  total: number,
  n: number,
  cfg: Pick<PrefixHashConfig, "loadFactor" | "balanceAbsThreshold">,
): boolean {
  if (total === 0) return true;
  const avg = (total + 1) / n;
  return load <= Math.max(avg * cfg.loadFactor, avg + cfg.balanceAbsThreshold);
}

/** The candidate with the fewest requests in flight; the first wins ties. */
function leastLoaded<W extends WorkerView>(candidates: readonly W[]): W {
  let best = candidates[0];
  for (let i = 1; i < candidates.length; i++) {
    if (candidates[i].inFlight < best.inFlight) best = candidates[i];
  }
  return best;
}

/** Prefix-keyed ring routing with a load bound. */
export class PrefixHashPolicy implements Policy {
  readonly name = "prefix_hash";
  readonly needs: PolicyNeeds = { requestText: true, backendLoads: false };
  readonly #deps: PolicyDeps;
  readonly #cfg: PrefixHashConfig;
  readonly #keyOpts: PrefixKeyOptions;
  readonly #ring = new CandidateRing();
  readonly #ratios = new SteadyRatios();

  /** Reads `deps.config.prefixHash` and `cacheBoundaries` once. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
    this.#cfg = { ...deps.config.prefixHash };
    this.#keyOpts = {
      prefixTokenCount: this.#cfg.prefixTokenCount,
      boundaries: [...deps.config.cacheBoundaries],
    };
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    const n = candidates.length;
    if (n === 0) return this.#branch("no_healthy_workers", null);
    const keys = prefixKeys(
      request,
      this.#keyOpts,
      this.#ratios.of(request.model, request.charsPerToken),
    );
    if (keys.length === 0) return this.#branch("no_routing_key", leastLoaded(candidates));
    let total = 0;
    for (const c of candidates) total += c.inFlight;
    this.#ring.mark(candidates);
    let deepest: W | null = null;
    for (const key of keys) {
      const target = this.#ring.owner<W>(key.hash);
      if (target === null) break;
      deepest ??= target;
      if (loadOk(target.inFlight, total, n, this.#cfg)) {
        return this.#branch("ring_hit", target, key.depth);
      }
    }
    if (deepest === null) return this.#branch("fallback_least_load", leastLoaded(candidates));
    const least = leastLoaded(candidates);
    const pick = loadOk(least.inFlight, total, n, this.#cfg) ? least : deepest;
    return this.#branch("load_balance_walk", pick);
  }

  onWorkerRemoved(workerId: string): void {
    this.#ring.remove(workerId);
  }

  #branch<T extends WorkerView | null>(branch: string, pick: T, depth?: number): T {
    this.#deps.observer?.decision(this.name, branch);
    if (depth !== undefined && depth > 0 && this.#deps.log.enabled("trace")) {
      this.#deps.log.trace("prefix_hash ring hit", { depth, worker: pick?.url });
    }
    return pick;
  }
}
