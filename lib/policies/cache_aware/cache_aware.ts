/**
 * `cache_aware` (the default policy): requests go where their prefix already is, without letting
 * a worker drown. Per model, a radix tree records which worker was sent which prefix (characters,
 * or pages of `--block-size` token ids; `--cache-index hash`: hashed heads at
 * `--cache-boundaries`), kept in `model_trees.ts`; the load side is `balance.ts`.
 *
 * Per request, in one descent of the tree, by default (`--cache-aware-scoring cost`, ours): the
 * cheapest candidate, twice the tokens it would prefill plus its prefill backlog (`hit`, `spill`
 * or `miss`), see `cost.ts`. With `--cache-aware-scoring smg` (SMG's):
 * - match share above `--cache-threshold` → the least busy eligible worker holding the deepest
 *   matched prefix (`hit`), unless it is far busier than the mean — in-flight above both
 *   mean × `--balance-rel-threshold` and mean + `--balance-abs-threshold` — then the worker with
 *   the lowest expected wait (`spill`, which makes it a holder too: hot prefixes replicate);
 * - otherwise, or when no holder is eligible, the lowest expected wait (`miss`).
 * Either way, KV-usage spread or ceiling above its threshold (both off by default) → lowest
 * expected wait for every request (`pressure`). Expected wait is `--wait-model`'s score
 * (`expected_wait.ts`; SMG uses raw in-flight counts here). The pick's uncached and cached
 * tokens go in the selection note (the router's backlog and its prediction check). Whatever is
 * chosen is inserted. Trees are evicted to `--max-tree-size` (LRU tenant leaves) every
 * `--eviction-interval`, lazily on the request path; a removed worker is purged from every tree.
 *
 * KV-event mode (`deps.cacheIndex`, by URL): a worker whose event stream is up is judged by its
 * own account plus what it was sent in the last `IN_FLIGHT_MS` (`accountMatch`), one whose events
 * stopped by the tree, which records every decision. Over HTTP the gateway tokenizes only prompts
 * that encode at once (`RouteRequest.tokenizedText`; the rest route on their text), and records
 * those decisions in the text tree too. Tree feedback: an answer reporting clearly
 * fewer cached tokens than believed makes the tree forget the worker's stale branches
 * (`feedback.ts`); a worker's part of the tree is kept within its KV capacity (`keepWithin`).
 *
 * Tenants are worker URLs. With the mesh on (`deps.replicas` with a delta sink), each decision is
 * also published as a ladder of path hashes, peers' decisions kept as placements consulted as
 * matches (`shared_paths.ts`); the trees themselves (`shared`, a `ModelTreeSet`) apply deltas,
 * serve and replay repairs and apply corrections (`corrections.ts`). `export` and `apply` copy
 * trees between instances.
 */

import type { CacheAwareConfig } from "../../config/config.ts";
import { randomIndex } from "../../core/clock.ts";
import type { RouteRequest, SelectionNote, WorkerView } from "../../core/types.ts";
import { SteadyRatios } from "../../core/chars_per_token.ts";
import {
  argminUniform,
  backlogScore,
  promptTokens,
  reportMaxAgeMs,
  sanitizeTuning,
} from "../expected_wait.ts";
import type { Policy } from "../policy.ts";
import type { PolicyDeps } from "../policy_deps.ts";
import type { NewCorrection, PolicyReplicas, SharedTrees, TreeRole } from "../replicas.ts";
import { Balance } from "./balance.ts";
import { corrector, type FeedbackDeps } from "./feedback.ts";
import { cheapest } from "./cost.ts";
import { accountMatch, ownDepth, placementFresh, remoteOf } from "./matches.ts";
import { headKeys, pickHolder } from "./hash_index.ts";
import { keepWithin, type ModelTrees, ModelTreeSet } from "./model_trees.ts";
import {
  blockUnits,
  ladder,
  pathHashes,
  type PlacementMatch,
  RecentPairs,
  type TreeKind,
} from "./shared_paths.ts";
import type { PrefixMatch } from "./tree_types.ts";

/** A decision's branch, as counted in `smg_policy_decisions_total{policy="cache_aware"}`. */
export type CacheAwareBranch = "hit" | "miss" | "spill" | "pressure" | "fallback";

const NO_HASHES: number[] = [];

/** How long a decision counts as blocks its worker holds before its KV events can say so. */
const IN_FLIGHT_MS = 5000;

/** The cache_aware policy. */
export class CacheAwarePolicy implements Policy {
  readonly name = "cache_aware";
  readonly needs;
  readonly #d: PolicyDeps;
  readonly #c: CacheAwareConfig;
  readonly #boundaries: number[];
  readonly #trees: ModelTreeSet;
  readonly #balance: Balance;
  readonly #urls = new Map<string, string>();
  readonly #replicas: PolicyReplicas | null;
  readonly #role: TreeRole;
  readonly #steady = new SteadyRatios();
  readonly #feedback: FeedbackDeps;
  readonly #published = new RecentPairs();
  #nextEviction: number;

  /** Reads `deps.config.cacheAware`, least_load's tuning and the boundaries. */
  constructor(deps: PolicyDeps) {
    this.#d = deps;
    const c = this.#c = deps.config.cacheAware;
    const tuning = sanitizeTuning(deps.config.leastLoad);
    this.#balance = new Balance(c, tuning, reportMaxAgeMs(deps.config), deps.random);
    this.#trees = new ModelTreeSet(c, deps.now);
    this.#boundaries = [...new Set(deps.config.cacheBoundaries.filter((b) => b > 0))].sort((a, b) =>
      a - b
    );
    const pressure = c.balanceTokenUsageThreshold < 1 || c.overloadTokenUsageThreshold < 1 ||
      c.overlapDecay > 0;
    this.needs = { requestText: true, backendLoads: pressure };
    this.#nextEviction = deps.now() + deps.config.evictionIntervalSecs * 1000;
    this.#replicas = deps.replicas ?? null;
    this.#role = deps.role ?? "main";
    this.#replicas?.addTrees(this, this.#trees, this.#role);
    this.#feedback = {
      trees: this.#trees,
      now: deps.now,
      publisher: (model, kind) => {
        const sink = this.#replicas?.correctionSink ?? null;
        return sink && ((c: NewCorrection) => sink(this.#role, model, kind, c));
      },
      forgot: (model, kind, n) => deps.observer?.treeCorrection?.(model, kind, n),
    };
  }

  select<W extends WorkerView>(
    candidates: readonly W[],
    request: RouteRequest,
    note?: SelectionNote,
  ): W | null {
    if (candidates.length === 0) return null;
    const now = this.#d.now();
    if (now >= this.#nextEviction) this.evict(now);
    for (const w of candidates) this.#urls.set(w.id, w.url);
    const model = request.model ?? "unknown";
    const trees = this.#trees.get(model);
    const waits = () => this.#balance.waits(candidates, now);

    if (this.#balance.pressured(candidates, now)) {
      const w = candidates[argminUniform(waits(), this.#d.random)];
      this.#record(model, trees, request, w, now);
      return this.#decide("pressure", w, promptTokens(request), null, note);
    }
    if (this.#c.cacheIndex === "hash") {
      return this.#selectHashed(candidates, request, trees, now, waits, note);
    }

    const tokens = request.tokens && request.tokens.length > 0 ? request.tokens : null;
    const kind: TreeKind = tokens ? "token" : "string";
    const places = trees.placements[kind];
    const sink = this.#replicas?.deltaSink ?? null;
    const block = blockUnits(kind, this.#c.blockSize);
    const hashes = sink !== null || places.size > 0
      ? pathHashes(tokens ?? request.text, block)
      : NO_HASHES;
    const remote: PlacementMatch | null = places.size > 0
      ? places.deepest(hashes, block, (t, at) => {
        const w = candidates.find((w) => w.url === t);
        return w !== undefined && placementFresh(w, at, now);
      })
      : null;
    let branch: CacheAwareBranch = "miss";
    let uncached = promptTokens(request);
    let cached = 0;
    // Units (characters of text, or token ids) per token: the model's estimate, or a worker's
    // own where its answers gave one; an engine block in units at the model's estimate.
    const perToken = tokens ? 1 : request.charsPerToken;
    const perTokenOf = (w: WorkerView) => tokens ? 1 : w.charsPerToken ?? perToken;
    const engineBlock = Math.max(1, Math.round(this.#c.blockSize * perToken));
    // Where the model's workers publish KV events, a reporting worker's own account decides (the
    // tree still records, so that it is warm if the events stop); a worker whose stream is down,
    // or an empty index, leaves it to the tree.
    const index = tokens ? this.#d.cacheIndex?.(model) ?? null : null;
    const account = index !== null && !index.empty ? index : null;
    let believed = 0; // the pick's own depth in the local tree before the insert, in units
    const choose = (tree: PrefixMatch) => {
      const since = account ? trees.log.before("token", now - IN_FLIGHT_MS) : 0;
      const merged = account ? accountMatch(account, tokens!, tree, candidates, since) : null;
      if (note) note.matched = (merged ?? tree).matched;
      const url = decide(merged ?? tree, merged ? remoteOf(remote, account!) : remote);
      const fromTree = account === null || !account.reports(url);
      believed = fromTree && tree.matched > 0 ? tree.depths().get(url) ?? 0 : 0;
      return url;
    };
    const decide = (tree: PrefixMatch, remote: PlacementMatch | null) => {
      if (this.#c.scoring === "cost") {
        const held = tokens ? trees.tokens : trees.text;
        const r = this.#cheapest(candidates, tree, remote, perTokenOf, engineBlock, held, now);
        branch = r.branch;
        uncached = r.uncached;
        cached = r.cached;
        return r.worker.url;
      }
      // A peer's placement deeper than the local match counts as the match.
      const match = remote !== null && remote.depth > tree.matched
        ? { matched: remote.depth, total: tree.total, tenants: remote.tenants }
        : tree;
      const ratio = match.total === 0 ? 0 : match.matched / match.total;
      this.#d.observer?.matchRatio?.("cache_aware", ratio);
      let pick: W | null = null;
      if (ratio > this.#c.cacheThreshold) {
        const holders = candidates.filter((w) => match.tenants.includes(w.url));
        if (holders.length > 0) {
          pick = this.#balance.leastBusy(holders, now, match.total);
          branch = "hit";
          uncached = Math.ceil((match.total - match.matched) / perTokenOf(pick));
          if (this.#balance.gated(pick, candidates)) {
            pick = null;
            branch = "spill";
            uncached = promptTokens(request);
          }
        }
      }
      pick ??= candidates[argminUniform(waits(), this.#d.random)];
      cached = Math.floor(ownDepth(tree, remote, pick.url) / perTokenOf(pick));
      return pick.url;
    };
    const url = tokens
      ? trees.tokens.matchAndInsert(tokens, choose).tenant
      : trees.text.matchAndInsert(request.text, choose).tenant;
    this.#trees.stamped(trees, now);
    const chosen = candidates.find((w) => w.url === url) ??
      candidates[randomIndex(this.#d.random, candidates.length)];
    if (url !== null && this.#c.treeFeedback === "on") {
      keepWithin(tokens ? trees.tokens : trees.text, chosen, perTokenOf(chosen));
    }
    if (url !== null && tokens && request.tokenizedText) {
      // Tokens the gateway made from the text: the text tree learns the decision too, so a
      // request of the model routed on its text (too long to wait for) sees where this went.
      trees.text.insert(request.text, url);
      if (this.#c.treeFeedback === "on") {
        keepWithin(trees.text, chosen, chosen.charsPerToken ?? request.charsPerToken);
      }
    }
    if (url !== null && sink !== null) this.#publish(model, trees, kind, hashes, url);
    if (note && url !== null && believed > 0 && this.#c.treeFeedback === "on") {
      const units = tokens ?? request.text;
      note.onReport = corrector(
        this.#feedback,
        model,
        trees,
        units,
        url,
        believed,
        engineBlock,
        now,
      );
    }
    return this.#decide(url === null ? "fallback" : branch, chosen, uncached, cached, note);
  }

  /**
   * `--cache-aware-scoring cost` (`cost.ts`): the cheapest candidate, unless the balance gate
   * (`--balance-abs/rel-threshold`) vetoes a pick with a match (then the least backlog). Branch:
   * `hit` (the pick holds the deepest match), `spill` (a deeper holder lost on cost, or the
   * gate), `miss` (nobody holds any).
   */
  #cheapest<W extends WorkerView>(
    candidates: readonly W[],
    tree: PrefixMatch,
    remote: PlacementMatch | null,
    perToken: (w: WorkerView) => number,
    block: number,
    held: { tenantSize(url: string): number },
    now: number,
  ): { worker: W; branch: CacheAwareBranch; uncached: number; cached: number } {
    const heldBy = (url: string) => held.tenantSize(url);
    const work = {
      weight: this.#c.workWeight,
      of: (w: WorkerView) => this.#balance.recentWork(w, now),
    };
    const c = cheapest(candidates, tree, remote, perToken, block, heldBy, this.#d.random, work);
    const { matched, deepest } = c;
    this.#d.observer?.matchRatio?.("cache_aware", tree.total === 0 ? 0 : deepest / tree.total);
    let i = c.index;
    let branch: CacheAwareBranch = deepest === 0 ? "miss" : matched[i] < deepest ? "spill" : "hit";
    if (matched[i] > 0 && this.#balance.gated(candidates[i], candidates)) {
      i = argminUniform(candidates.map((w) => backlogScore(w)), this.#d.random);
      branch = "spill";
    }
    const ratio = perToken(candidates[i]);
    return {
      worker: candidates[i],
      branch,
      uncached: Math.ceil((tree.total - matched[i]) / ratio),
      cached: Math.floor(matched[i] / ratio),
    };
  }

  #selectHashed<W extends WorkerView>(
    candidates: readonly W[],
    request: RouteRequest,
    trees: ModelTrees,
    now: number,
    waits: () => number[],
    note?: SelectionNote,
  ): W | null {
    const units = request.tokens && request.tokens.length > 0 ? request.tokens : request.text;
    const steady = this.#steady.of(request.model ?? "unknown", request.charsPerToken);
    const keys = headKeys(units, this.#boundaries, steady);
    const gated = (w: W) => this.#balance.gated(w, candidates);
    const busy = (live: W[]) => this.#balance.leastBusy(live, now, units.length);
    const { pick, branch } = pickHolder(trees.hash, keys, candidates, now, busy, gated);
    const w = pick ?? candidates[argminUniform(waits(), this.#d.random)];
    trees.hash.record(keys, w.url, now);
    return this.#decide(branch, w, branch === "hit" ? 0 : promptTokens(request), null, note);
  }

  /** Drops a removed worker from every tree and index. */
  onWorkerRemoved(workerId: string): void {
    const url = this.#urls.get(workerId);
    if (url === undefined) return;
    this.#urls.delete(workerId);
    this.#balance.forget(workerId);
    if ([...this.#urls.values()].includes(url)) return;
    this.#trees.removeTenant(url);
  }

  /** Evicts every tree to the budget and reports sizes; runs every `--eviction-interval`. */
  evict(now: number): void {
    this.#nextEviction = now + this.#d.config.evictionIntervalSecs * 1000;
    this.#trees.evict(this.#c.maxTreeSize, now, this.#d.observer);
  }

  /** Every tenant leaf of a model's trees, to seed another gateway's trees. */
  export(model: string): Iterable<{ key: string | readonly number[]; tenant: string }> {
    return this.#trees.export(model);
  }

  /** Records a decision made elsewhere (another gateway), without publishing it. */
  apply(model: string, key: string | readonly number[], tenant: string): void {
    this.#trees.apply(model, key, tenant);
  }

  /** Its trees as the mesh shares them (`PolicyReplicas`). */
  get shared(): SharedTrees {
    return this.#trees;
  }

  #record(model: string, trees: ModelTrees, request: RouteRequest, w: WorkerView, now: number) {
    if (this.#c.cacheIndex === "hash") {
      const units = request.tokens && request.tokens.length > 0 ? request.tokens : request.text;
      const steady = this.#steady.of(model, request.charsPerToken);
      trees.hash.record(headKeys(units, this.#boundaries, steady), w.url, now);
    } else if (request.tokens && request.tokens.length > 0) {
      trees.tokens.insert(request.tokens, w.url);
      this.#trees.stamped(trees, now);
      this.#share(model, trees, "token", request.tokens, w.url);
    } else {
      trees.text.insert(request.text, w.url);
      this.#trees.stamped(trees, now);
      this.#share(model, trees, "string", request.text, w.url);
    }
  }

  /** Publishes a decision made outside the tree walk (the pressure branch). */
  #share(
    model: string,
    trees: ModelTrees,
    kind: TreeKind,
    key: string | readonly number[],
    url: string,
  ): void {
    if (!this.#replicas?.deltaSink) return;
    this.#publish(model, trees, kind, pathHashes(key, blockUnits(kind, this.#c.blockSize)), url);
  }

  /**
   * Places `url` at the `ladder` of `hashes` (a request's boundary hashes) here and at the peers,
   * unless this path went to `url` within `REPUBLISH_MS` and is still placed there (a hot prompt).
   */
  #publish(
    model: string,
    trees: ModelTrees,
    kind: TreeKind,
    hashes: readonly number[],
    url: string,
  ): void {
    const sink = this.#replicas?.deltaSink;
    if (!sink || hashes.length === 0) return;
    const now = this.#d.now();
    const places = trees.placements[kind];
    const deepest = hashes[hashes.length - 1];
    if (!this.#published.first(deepest, url, now) && places.holds(deepest, url)) return;
    for (const i of ladder(hashes.length).reverse()) {
      places.add(hashes[i], url, now);
      sink(this.#role, model, kind, hashes[i], url);
    }
  }

  #decide<W extends WorkerView>(
    branch: CacheAwareBranch,
    w: W,
    uncachedTokens: number,
    cachedTokens: number | null,
    note: SelectionNote | undefined,
  ): W {
    this.#d.observer?.decision("cache_aware", branch);
    if (note) {
      note.prefillTokens = uncachedTokens;
      note.predictedCached = cachedTokens;
    }
    this.#balance.credit(w, uncachedTokens);
    this.#balance.addWork(w, uncachedTokens, this.#d.now());
    return w;
  }
}
