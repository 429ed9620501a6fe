/**
 * What cache_aware keeps per model: the string tree (text requests), the token tree (token-id
 * requests), the hash index (`--cache-index hash`), the peers' placements per tree kind, and what
 * corrections leave (`corrections.ts`). In: models by name, workers removed, eviction ticks,
 * workers' reports of what they hold, and a mesh's trees, deltas and corrections to replay; out:
 * the structures a decision walks, sizes for the observer, trees exported for a repair, and
 * corrections to publish. Implements `SharedTrees`, the policies' side of tree sync
 * (`../replicas.ts`).
 */

import type { CacheAwareConfig } from "../../config/config.ts";
import type { WorkerView } from "../../core/types.ts";
import type { PolicyObserver } from "../policy.ts";
import type { NewCorrection, SharedTrees, TreeCorrection, TreeEntry } from "../replicas.ts";
import { branchOf, staleHashes, StampLog, Tombstones } from "./corrections.ts";
import { HashIndex } from "./hash_index.ts";
import { blockUnits, Placements, type TreeKind } from "./shared_paths.ts";
import { StringTree } from "./string_tree.ts";
import { TokenTree } from "./token_tree.ts";

/** One model's prefix structures. */
export interface ModelTrees {
  /** Text prefixes and the workers they were sent to. */
  text: StringTree;
  /** Token-id prefixes, in pages of `--block-size`. */
  tokens: TokenTree;
  /** Hashed heads (`--cache-index hash`). */
  hash: HashIndex;
  /** Peers' decisions (and, while sharing, this router's) by path hash, per tree kind. */
  placements: Record<TreeKind, Placements>;
  /** Corrections remembered (while sharing), per tree kind. */
  corrections: Record<TreeKind, Tombstones>;
  /** The trees' stamps by time. */
  log: StampLog;
}

/** Models a policy creates trees for on its peers' word (its own requests are not limited). */
const MAX_MODELS = 256;

/** The trees of every model one cache-aware policy routes. */
export class ModelTreeSet implements SharedTrees {
  readonly #models = new Map<string, ModelTrees>();
  readonly #c: Pick<CacheAwareConfig, "blockSize" | "cacheTtlSecs">;
  readonly #now: () => number;

  /**
   * Trees paged by `--block-size` tokens, hash-index entries living `--cache-ttl-secs`; `now`
   * dates corrections and tree stamps (default 0: corrections from peers forget nothing).
   */
  constructor(
    c: Pick<CacheAwareConfig, "blockSize" | "cacheTtlSecs">,
    now: () => number = () => 0,
  ) {
    this.#c = c;
    this.#now = now;
  }

  /** `model`'s trees, created on first use. */
  get(model: string): ModelTrees {
    let t = this.#models.get(model);
    if (!t) {
      t = {
        text: new StringTree(),
        tokens: new TokenTree({ pageSize: this.#c.blockSize }),
        hash: new HashIndex(this.#c.cacheTtlSecs * 1000),
        placements: { string: new Placements(), token: new Placements() },
        corrections: { string: new Tombstones(), token: new Tombstones() },
        log: new StampLog(),
      };
      this.#models.set(model, t);
    }
    return t;
  }

  /** Drops worker `url` from every tree and index. */
  removeTenant(url: string): void {
    for (const t of this.#models.values()) {
      t.text.removeTenant(url);
      t.tokens.removeTenant(url);
      t.hash.removeTenant(url);
      t.placements.string.removeTenant(url);
      t.placements.token.removeTenant(url);
    }
  }

  /** Evicts every tree to `budget` and reports sizes to `observer`. */
  evict(budget: number, now: number, observer: PolicyObserver | undefined): void {
    for (const [model, t] of this.#models) {
      t.text.evict(budget);
      t.tokens.evict(budget);
      const entries = t.hash.sweep(now);
      observer?.treeSize?.(model, "string", t.text.size, t.text.tenants().length);
      observer?.treeSize?.(model, "token", t.tokens.size, t.tokens.tenants().length);
      observer?.placements?.(model, entries);
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
    const t = this.get(model);
    if (typeof key === "string") t.text.apply(key, tenant);
    else t.tokens.apply(key, tenant);
    this.stamped(t);
  }

  /** Notes the time of `t`'s latest stamps (after each insert). */
  stamped(t: ModelTrees, now = this.#now()): void {
    t.log.record(now, t.text.stamp, t.tokens.stamp);
  }

  /**
   * Worker `url` reported holding only `held` units of `key`, which was routed `ageMs` ago with
   * the tree at stamp `before`: it leaves the branch of `key` beyond `held` where it was recorded
   * before, and the placements of the paths forgotten. When something was forgotten and the
   * placements are shared (`publish`), the correction is published and remembered. Returns the
   * units forgotten.
   */
  correct(
    t: ModelTrees,
    key: string | readonly number[],
    url: string,
    held: number,
    before: number,
    ageMs: number,
    publish: ((c: NewCorrection) => string) | null,
  ): number {
    const kind: TreeKind = typeof key === "string" ? "string" : "token";
    const places = t.placements[kind];
    const hashes = new Set<number>();
    const block = blockUnits(kind, this.#c.blockSize);
    const stale = publish !== null || places.size > 0 ? staleHashes(block, hashes) : undefined;
    const forgotten = typeof key === "string"
      ? t.text.forgetBeyond(key, url, held, before, stale)
      : t.tokens.forgetBeyond(key, url, held, before, stale);
    for (const h of hashes) places.drop(h, url);
    if (forgotten === 0 || publish === null) return forgotten;
    const c: NewCorrection = {
      worker: url,
      ...branchOf(key, held, block),
      hashes: [...hashes],
      ageMs,
    };
    t.corrections[kind].record({ ...c, id: publish(c) }, hashes, this.#now());
    return forgotten;
  }

  applyCorrection(model: string, kind: TreeKind, c: TreeCorrection): NewCorrection | null {
    const t = this.#peerTrees(model);
    if (t === null || t.corrections[kind].has(c.id)) return null;
    const now = this.#now();
    const own = new Set<number>();
    const { branch, worker } = c;
    const before = t.log.before(kind, now - c.ageMs);
    if (branch !== null && before > 0) {
      const stale = staleHashes(blockUnits(kind, this.#c.blockSize), own);
      if (kind === "string" && typeof branch === "string") {
        t.text.forgetBeyond(branch, worker, c.kept, before, stale);
      } else if (kind === "token" && typeof branch !== "string") {
        t.tokens.forgetBeyond(branch, worker, c.kept, before, stale);
      }
    }
    const places = t.placements[kind];
    for (const h of c.hashes) places.drop(h, worker);
    for (const h of own) places.drop(h, worker);
    t.corrections[kind].record(c, [...c.hashes, ...own], now);
    const named = new Set(c.hashes);
    const relay = [...own].filter((h) => !named.has(h));
    return relay.length === 0
      ? null
      : { worker, branch: null, kept: 0, hashes: relay, ageMs: c.ageMs };
  }

  corrections(model: string, kind: TreeKind): TreeCorrection[] {
    return this.#models.get(model)?.corrections[kind].live(this.#now()) ?? [];
  }

  applyDelta(model: string, kind: TreeKind, hash: number, tenant: string): boolean {
    const t = this.#peerTrees(model);
    return t === null ? false : t.placements[kind].add(hash, tenant, this.#now());
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

  /** Replays one exported entry, short of what a remembered correction forgot. */
  applyEntry(model: string, kind: TreeKind, entry: TreeEntry): void {
    const t = this.#peerTrees(model);
    if (t === null) return;
    const now = this.#now();
    const stones = t.corrections[kind];
    if ("hash" in entry) {
      // Oldest holder first, so the most recent ends up first.
      for (let i = entry.tenants.length - 1; i >= 0; i--) {
        const x = entry.tenants[i];
        if (stones.admits(entry.hash, x, now)) t.placements[kind].add(entry.hash, x, now);
      }
      return;
    }
    const path = "path" in entry ? entry.path : entry.tokens;
    if ((kind === "string") !== (typeof path === "string")) return;
    for (const x of entry.tenants) {
      const n = stones.admitted(path, x, now);
      if (n === 0 && path.length > 0) continue;
      const p = n === path.length ? path : path.slice(0, n);
      if (typeof p === "string") t.text.apply(p, x);
      else t.tokens.apply(p, x);
    }
    this.stamped(t, now);
  }

  /**
   * A model's trees for a peer's decision: peers name models too (clients choose them), so a
   * new one is created only while the policy holds fewer than `MAX_MODELS` models; null past it.
   */
  #peerTrees(model: string): ModelTrees | null {
    return this.#models.has(model) || this.#models.size < MAX_MODELS ? this.get(model) : null;
  }
}

/** Share of a worker's stated KV capacity its part of the tree may hold before it is trimmed. */
export const KEEP_HIGH = 0.9;

/** Share it is trimmed to. */
export const KEEP_LOW = 0.85;

/**
 * Tree feedback's other half: `w`'s part of `tree` kept within the KV capacity its engine states
 * (`WorkerView.kvCapacity`, `perToken` units a token), as the engine evicts: past `KEEP_HIGH` of
 * it, its least recently sent branches go until `KEEP_LOW` of it remains. Not the whole capacity:
 * an engine also holds the uncomputed prompts and output room of what it runs, and measured on
 * the shipped trace with 256k-token caches it had evicted a prompt by the time 93 % of its
 * capacity had come after it (a tree kept to 100 % then predicted 1.25-1.28× the cached tokens
 * reported at 2 and 16 characters a token; kept to 90 %, 1.00-1.17, with the same hits). Nothing
 * without a stated capacity.
 */
export function keepWithin(tree: StringTree | TokenTree, w: WorkerView, perToken: number): void {
  const cap = w.kvCapacity;
  if (!cap) return;
  const units = cap * perToken;
  if (tree.tenantSize(w.url) > units * KEEP_HIGH) tree.evict(Math.floor(units * KEEP_LOW), w.url);
}
