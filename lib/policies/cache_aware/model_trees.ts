/**
 * What cache_aware keeps per model: the string tree (text requests), the token tree (token-id
 * requests), the hash index (`--cache-index hash`) and the peers' placements per tree kind. In:
 * models by name, workers removed, eviction ticks, and a mesh's trees and deltas to replay; out:
 * the structures a decision walks, sizes for the observer, and trees exported for a repair.
 * Implements `SharedTrees`, the policies' side of tree sync (`../replicas.ts`).
 */

import type { CacheAwareConfig } from "../../config/config.ts";
import type { PolicyObserver } from "../policy.ts";
import type { SharedTrees, TreeEntry } from "../replicas.ts";
import { HashIndex } from "./hash_index.ts";
import { Placements, type TreeKind } from "./shared_paths.ts";
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
}

/** Models a policy creates trees for on its peers' word (its own requests are not limited). */
const MAX_MODELS = 256;

/** The trees of every model one cache-aware policy routes. */
export class ModelTreeSet implements SharedTrees {
  readonly #models = new Map<string, ModelTrees>();
  readonly #c: Pick<CacheAwareConfig, "blockSize" | "cacheTtlSecs">;

  /** Trees paged by `--block-size` tokens, hash-index entries living `--cache-ttl-secs`. */
  constructor(c: Pick<CacheAwareConfig, "blockSize" | "cacheTtlSecs">) {
    this.#c = c;
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
    return this.#models.has(model) || this.#models.size < MAX_MODELS ? this.get(model) : null;
  }
}
