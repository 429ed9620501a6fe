/**
 * `cache_aware` (the default policy): requests go where their prefix already is, without
 * letting a worker drown. Per model, an approximate radix tree records which worker was sent
 * which prefix (characters for text, pages of `--block-size` tokens for token ids; or, with
 * `--cache-index hash`, hashed heads at `--cache-boundaries`).
 *
 * Per request, in one descent of the tree, by default (`--cache-aware-scoring cost`, ours):
 * every candidate costs twice the tokens it would prefill, its uncached share given its own
 * match (`PrefixMatch.depths`), plus its prefill backlog (`backlogScore`); the cheapest wins (`hit` if
 * it holds the deepest match, `spill` if a deeper holder lost, `miss` if nobody holds any), see
 * `cost.ts`. With `--cache-aware-scoring smg` (upstream's):
 * - match share above `--cache-threshold` → the least busy eligible worker holding the deepest
 *   matched prefix (`hit`), unless it is far busier than the mean — in-flight above both
 *   mean × `--balance-rel-threshold` and mean + `--balance-abs-threshold` — then the worker with
 *   the lowest expected wait (`spill`, which makes it a holder too: hot prefixes replicate);
 * - otherwise, or when no holder is eligible, the lowest expected wait (`miss`).
 * Either way, KV-usage spread or ceiling above its threshold (both off by default) → lowest
 * expected wait for every request (`pressure`). Expected wait is `--wait-model`'s score
 * (`expected_wait.ts`) — upstream uses raw in-flight counts here, the seed the expected wait.
 * The pick's uncached and cached tokens go in the selection note (the router's backlog and its
 * prediction check). Whatever is chosen is inserted. Trees are evicted to `--max-tree-size` (LRU tenant leaves) every
 * `--eviction-interval`, lazily on the request path; a removed worker is purged from every tree.
 *
 * Tenants are worker URLs (what another gateway of a mesh knows a worker by). With the mesh on
 * (`deps.replicas` with a delta sink), each decision is also published as a path hash and the
 * peers' decisions are kept as placements consulted as matches (`shared_paths.ts`); `exportTree`
 * and `applyEntry` serve repairs. `export` and `apply` copy trees between instances.
 */

import type { CacheAwareConfig } from "../../config/config.ts";
import { randomIndex } from "../../core/clock.ts";
import type { RouteRequest, SelectionNote, WorkerView } from "../../core/types.ts";
import {
  argminUniform,
  backlogScore,
  CHARS_PER_TOKEN,
  expectedWaits,
  type ExpectedWaitTuning,
  freshLoad,
  promptTokens,
  reportMaxAgeMs,
  sanitizeTuning,
  SinceReportCredit,
} from "../expected_wait.ts";
import type { Policy } from "../policy.ts";
import type { PolicyDeps } from "../policy_deps.ts";
import type { PolicyReplicas, SharedTrees, TreeEntry, TreeRole } from "../replicas.ts";
import { HashIndex, headKeys } from "./hash_index.ts";
import {
  blockUnits,
  pathHashes,
  type PlacementMatch,
  Placements,
  type TreeKind,
} from "./shared_paths.ts";
import { cheapest } from "./cost.ts";
import { StringTree } from "./string_tree.ts";
import { TokenTree } from "./token_tree.ts";
import type { PrefixMatch } from "./tree_types.ts";

/** A decision's branch, as counted in `smg_policy_decisions_total{policy="cache_aware"}`. */
export type CacheAwareBranch = "hit" | "miss" | "spill" | "pressure" | "fallback";

interface ModelTrees {
  text: StringTree;
  tokens: TokenTree;
  hash: HashIndex;
  /** Peers' decisions (and, while sharing, this router's) by path hash, per tree kind. */
  placements: Record<TreeKind, Placements>;
}

const NO_HASHES: number[] = [];

/** The cache_aware policy. */
export class CacheAwarePolicy implements Policy, SharedTrees {
  readonly name = "cache_aware";
  readonly needs;
  readonly #d: PolicyDeps;
  readonly #c: CacheAwareConfig;
  readonly #tuning: ExpectedWaitTuning;
  readonly #maxAgeMs: number;
  readonly #boundaries: number[];
  readonly #models = new Map<string, ModelTrees>();
  readonly #urls = new Map<string, string>();
  readonly #credit = new SinceReportCredit();
  readonly #replicas: PolicyReplicas | null;
  readonly #role: TreeRole;
  #nextEviction: number;

  /** Reads `deps.config.cacheAware`, least_load's tuning and the boundaries. */
  constructor(deps: PolicyDeps) {
    this.#d = deps;
    const c = this.#c = deps.config.cacheAware;
    this.#tuning = sanitizeTuning(deps.config.leastLoad);
    this.#maxAgeMs = reportMaxAgeMs(deps.config);
    this.#boundaries = [...new Set(deps.config.cacheBoundaries.filter((b) => b > 0))].sort((a, b) =>
      a - b
    );
    const pressure = c.balanceTokenUsageThreshold < 1 || c.overloadTokenUsageThreshold < 1 ||
      c.overlapDecay > 0;
    this.needs = { requestText: true, backendLoads: pressure };
    this.#nextEviction = deps.now() + deps.config.evictionIntervalSecs * 1000;
    this.#replicas = deps.replicas ?? null;
    this.#role = deps.role ?? "main";
    this.#replicas?.addTrees(this, this.#role);
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
    const trees = this.#trees(model);
    const waits = () => this.#waits(candidates, now);

    if (this.#pressured(candidates, now)) {
      const w = candidates[argminUniform(waits(), this.#d.random)];
      this.#record(model, trees, request, w.url, now);
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
      ? places.deepest(hashes, block, (t) => candidates.some((w) => w.url === t))
      : null;
    let branch: CacheAwareBranch = "miss";
    let uncached = promptTokens(request);
    let cached = 0;
    const perToken = tokens ? 1 : CHARS_PER_TOKEN;
    const choose = (tree: PrefixMatch) => {
      if (this.#c.scoring === "cost") {
        const held = tokens ? trees.tokens : trees.text;
        const r = this.#cheapest(candidates, tree, remote, perToken, (u) => held.tenantSize(u));
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
          pick = this.#leastBusy(holders, now, match.total);
          branch = "hit";
          uncached = Math.ceil((match.total - match.matched) / perToken);
          if (this.#gated(pick, candidates)) {
            pick = null;
            branch = "spill";
            uncached = promptTokens(request);
          }
        }
      }
      pick ??= candidates[argminUniform(waits(), this.#d.random)];
      cached = Math.floor(ownDepth(tree, remote, pick.url) / perToken);
      return pick.url;
    };
    const url = tokens
      ? trees.tokens.matchAndInsert(tokens, choose).tenant
      : trees.text.matchAndInsert(request.text, choose).tenant;
    const chosen = candidates.find((w) => w.url === url) ??
      candidates[randomIndex(this.#d.random, candidates.length)];
    if (url !== null && hashes.length > 0 && sink !== null) {
      places.add(hashes[hashes.length - 1], url);
      sink(this.#role, model, kind, hashes[hashes.length - 1], url);
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
    perToken: number,
    heldBy: (url: string) => number,
  ): { worker: W; branch: CacheAwareBranch; uncached: number; cached: number } {
    const floor = this.#c.cacheThreshold * tree.total;
    const c = cheapest(candidates, tree, remote, perToken, floor, heldBy, this.#d.random);
    const { matched, deepest } = c;
    this.#d.observer?.matchRatio?.("cache_aware", tree.total === 0 ? 0 : deepest / tree.total);
    let i = c.index;
    let branch: CacheAwareBranch = deepest === 0 ? "miss" : matched[i] < deepest ? "spill" : "hit";
    if (matched[i] > 0 && this.#gated(candidates[i], candidates)) {
      i = argminUniform(candidates.map((w) => backlogScore(w)), this.#d.random);
      branch = "spill";
    }
    return {
      worker: candidates[i],
      branch,
      uncached: Math.ceil((tree.total - matched[i]) / perToken),
      cached: Math.floor(matched[i] / perToken),
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
    const keys = headKeys(units, this.#boundaries);
    const byUrl = new Map(candidates.map((w) => [w.url, w]));
    const found = trees.hash.lookup(keys, now, (urls) => {
      const live = urls.map((u) => byUrl.get(u)).filter((w): w is W => w !== undefined);
      return live.length > 0 ? this.#leastBusy(live, now, units.length).url : null;
    });
    let pick = found ? byUrl.get(found.id)! : null;
    let branch: CacheAwareBranch = pick ? "hit" : "miss";
    if (pick && this.#gated(pick, candidates)) {
      pick = null;
      branch = "spill";
    }
    pick ??= candidates[argminUniform(waits(), this.#d.random)];
    trees.hash.record(keys, pick.url, now);
    return this.#decide(branch, pick, branch === "hit" ? 0 : promptTokens(request), null, note);
  }

  /** Drops a removed worker from every tree and index. */
  onWorkerRemoved(workerId: string): void {
    const url = this.#urls.get(workerId);
    if (url === undefined) return;
    this.#urls.delete(workerId);
    this.#credit.forget(workerId);
    if ([...this.#urls.values()].includes(url)) return;
    for (const t of this.#models.values()) {
      t.text.removeTenant(url);
      t.tokens.removeTenant(url);
      t.hash.removeTenant(url);
      t.placements.string.removeTenant(url);
      t.placements.token.removeTenant(url);
    }
  }

  /** Evicts every tree to the budget and reports sizes; runs every `--eviction-interval`. */
  evict(now: number): void {
    this.#nextEviction = now + this.#d.config.evictionIntervalSecs * 1000;
    const budget = this.#c.maxTreeSize;
    for (const [model, t] of this.#models) {
      t.text.evict(budget);
      t.tokens.evict(budget);
      const entries = t.hash.sweep(now);
      this.#d.observer?.treeSize?.(model, "string", t.text.size, t.text.tenants().length);
      this.#d.observer?.treeSize?.(model, "token", t.tokens.size, t.tokens.tenants().length);
      this.#d.observer?.placements?.(model, entries);
    }
  }

  /** Every tenant leaf of a model's trees, to seed another gateway's trees. */
  *export(model: string): Iterable<{ key: string | readonly number[]; tenant: string }> {
    const t = this.#models.get(model);
    if (!t) return;
    for (const e of t.text.export()) yield { key: e.text, tenant: e.tenant };
    for (const e of t.tokens.export()) yield { key: e.tokens, tenant: e.tenant };
  }

  /** Records a decision made elsewhere (another gateway), without publishing it. */
  apply(model: string, key: string | readonly number[], tenant: string): void {
    const t = this.#trees(model);
    if (typeof key === "string") t.text.apply(key, tenant);
    else t.tokens.apply(key, tenant);
  }

  applyDelta(model: string, kind: TreeKind, hash: number, tenant: string): boolean {
    const t = this.#peerTrees(model);
    return t === null ? false : t.placements[kind].add(hash, tenant);
  }

  *exportTree(model: string, kind: TreeKind): Iterable<TreeEntry> {
    const t = this.#models.get(model);
    if (!t) return;
    // Tree order, so that a page can send each path as what it adds to the previous one.
    if (kind === "string") {
      for (const e of t.text.export("path")) yield { path: e.text, tenants: [e.tenant] };
    } else {
      for (const e of t.tokens.export("path")) yield { tokens: e.tokens, tenants: [e.tenant] };
    }
    yield* t.placements[kind].entries(); // hashes listed once the paths are done
  }

  heldTrees(): { model: string; kind: TreeKind }[] {
    const out: { model: string; kind: TreeKind }[] = [];
    for (const [model, t] of this.#models) {
      if (t.text.size > 0 || t.placements.string.size > 0) out.push({ model, kind: "string" });
      if (t.tokens.size > 0 || t.placements.token.size > 0) out.push({ model, kind: "token" });
    }
    return out;
  }

  applyEntry(model: string, kind: TreeKind, entry: TreeEntry): void {
    const t = this.#peerTrees(model);
    if (t === null) return;
    if ("hash" in entry) {
      // Oldest holder first, so the most recent ends up first.
      for (let i = entry.tenants.length - 1; i >= 0; i--) {
        t.placements[kind].add(entry.hash, entry.tenants[i]);
      }
    } else if ("path" in entry) {
      if (kind === "string") { for (const x of entry.tenants) t.text.apply(entry.path, x); }
    } else if (kind === "token") { for (const x of entry.tenants) t.tokens.apply(entry.tokens, x); }
  }

  /**
   * A model's trees for a peer's decision: peers name models too (clients choose them), so a
   * new one is created only while the policy holds fewer than `MAX_MODELS` models; null past it.
   */
  #peerTrees(model: string): ModelTrees | null {
    return this.#models.has(model) || this.#models.size < MAX_MODELS ? this.#trees(model) : null;
  }

  #trees(model: string): ModelTrees {
    let t = this.#models.get(model);
    if (!t) {
      t = {
        text: new StringTree(),
        tokens: new TokenTree({ pageSize: this.#c.blockSize }),
        hash: new HashIndex(this.#c.cacheTtlSecs * 1000),
        placements: { string: new Placements(), token: new Placements() },
      };
      this.#models.set(model, t);
    }
    return t;
  }

  #record(model: string, trees: ModelTrees, request: RouteRequest, url: string, now: number): void {
    if (this.#c.cacheIndex === "hash") {
      const units = request.tokens && request.tokens.length > 0 ? request.tokens : request.text;
      trees.hash.record(headKeys(units, this.#boundaries), url, now);
    } else if (request.tokens && request.tokens.length > 0) {
      trees.tokens.insert(request.tokens, url);
      this.#share(model, trees, "token", request.tokens, url);
    } else {
      trees.text.insert(request.text, url);
      this.#share(model, trees, "string", request.text, url);
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
    const sink = this.#replicas?.deltaSink;
    if (!sink) return;
    const hashes = pathHashes(key, blockUnits(kind, this.#c.blockSize));
    if (hashes.length === 0) return;
    const h = hashes[hashes.length - 1];
    trees.placements[kind].add(h, url);
    sink(this.#role, model, kind, h, url);
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
    // Work sent since the worker's last load report counts in its expected wait, so misses
    // between two reports spread instead of all landing on the momentary argmin.
    this.#credit.add(w, uncachedTokens);
    return w;
  }

  #waits(candidates: readonly WorkerView[], now: number): number[] {
    const loads = candidates.map((w) => freshLoad(w, now, this.#maxAgeMs));
    return expectedWaits(candidates, loads, (w) => this.#credit.tokens(w), this.#tuning).scores;
  }

  /**
   * The holder to use. By default the one with the lowest expected wait. With `--overlap-decay`
   * d > 0 each holder scores 1 / (1 + d·x), x = its queued uncached tokens above the least
   * backlogged holder's, in blocks per request block (holders without a report are not
   * decayed); the best score wins, expected wait breaks ties. With `--selection-temperature`
   * t > 0 the holder is sampled with weights exp((s′ − 1)/t) over the normalised scores.
   */
  #leastBusy<W extends WorkerView>(holders: readonly W[], now: number, requestUnits: number): W {
    if (holders.length === 1) return holders[0];
    const waits = this.#waits(holders, now);
    const c = this.#c;
    if (c.overlapDecay <= 0 && c.selectionTemperature <= 0) {
      return holders[argminUniform(waits, this.#d.random)];
    }
    const backlog = holders.map((w) =>
      freshLoad(w, now, this.#maxAgeMs)?.waitingUncachedTokens ?? null
    );
    const known = backlog.filter((b): b is number => b !== null);
    const least = known.length > 0 ? Math.min(...known) : 0;
    const blocks = Math.max(1, requestUnits / c.blockSize);
    const scores = backlog.map((b) =>
      c.overlapDecay > 0 && b !== null
        ? 1 / (1 + c.overlapDecay * ((b - least) / c.blockSize) / blocks)
        : 1
    );
    if (c.selectionTemperature > 0) {
      return holders[softmaxPick(scores, c.selectionTemperature, this.#d.random)];
    }
    const best = Math.max(...scores);
    const tied = holders.filter((_, i) => scores[i] === best);
    return tied[argminUniform(this.#waits(tied, now), this.#d.random)];
  }

  /** The per-request gate: far busier than the mean by both margins. */
  #gated(w: WorkerView, candidates: readonly WorkerView[]): boolean {
    let sum = 0;
    for (const c of candidates) sum += c.inFlight;
    const mean = sum / candidates.length;
    return w.inFlight > mean * this.#c.balanceRelThreshold &&
      w.inFlight > mean + this.#c.balanceAbsThreshold;
  }

  /** KV usage spread or ceiling above its threshold among fresh reports. */
  #pressured(candidates: readonly WorkerView[], now: number): boolean {
    const c = this.#c;
    if (c.balanceTokenUsageThreshold >= 1 && c.overloadTokenUsageThreshold >= 1) return false;
    let max = -Infinity;
    let min = Infinity;
    for (const w of candidates) {
      const l = freshLoad(w, now, this.#maxAgeMs);
      if (!l) continue;
      max = Math.max(max, l.tokenUsage);
      min = Math.min(min, l.tokenUsage);
    }
    if (max === -Infinity) return false;
    return max > c.overloadTokenUsageThreshold || max - min > c.balanceTokenUsageThreshold;
  }
}

/** `url`'s own matched units: the tree's depth for it, or a peer's placement when deeper. */
function ownDepth(tree: PrefixMatch, remote: PlacementMatch | null, url: string): number {
  const local = tree.matched > 0 ? tree.depths().get(url) ?? 0 : 0;
  return remote !== null && remote.depth > local && remote.tenants.includes(url)
    ? remote.depth
    : local;
}

/** Models a policy creates trees for on its peers' word (its own requests are not limited). */
const MAX_MODELS = 256;

/** Samples an index with weights exp((s′ − 1)/t), s′ the min-max normalised score. */
function softmaxPick(scores: readonly number[], t: number, random: () => number): number {
  const max = Math.max(...scores);
  const min = Math.min(...scores);
  if (max === min) return randomIndex(random, scores.length);
  const w = scores.map((s) => Math.exp(((s - min) / (max - min) - 1) / t));
  let r = random() * w.reduce((a, b) => a + b, 0);
  for (let i = 0; i < w.length; i++) {
    r -= w[i];
    if (r < 0) return i;
  }
  return w.length - 1;
}
