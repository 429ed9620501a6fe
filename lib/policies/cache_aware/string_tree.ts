/**
 * `StringTree`: cache_aware's approximate record of which tenants (worker ids) were sent which
 * text prefixes, as a compressed character radix tree (SMG's kv_index `Tree`). In: request texts
 * and the tenant chosen for each; out: `PrefixMatch`es (matched characters, tenants of the
 * deepest matched node), sizes, and tenant-leaf entries for the mesh.
 *
 * `matchAndInsert` is one descent: walk, let the policy choose, insert from where the walk
 * stopped. Every node on an inserted path gets a fresh stamp for the tenant (SMG stamps new
 * intermediates 0 and refreshes matches only with probability 1/8). Lengths are UTF-16
 * code units; an edge may split inside a surrogate pair, which only matters for display. Labels
 * are copied flat so a node never keeps a whole request body alive through a sliced string.
 */

import { TreeCore } from "./tree_core.ts";
import { childAt, copyTenants, type CoreNode, linkChild, stampOf } from "./tree_node.ts";
import type { PrefixMatch, StringEntry, TenantChooser } from "./tree_types.ts";

/** Options of a `StringTree`. */
export interface StringTreeOptions {
  /** Called after each insert the policy makes (not after `apply`); default none. */
  onInsert?: (text: string, tenant: string) => void;
}

class StringNode implements CoreNode<StringNode> {
  key: number;
  len: number;
  parent: StringNode | null = null;
  child: StringNode | null = null;
  children: Map<number, StringNode> | null = null;
  next: StringNode | null = null;
  tenant: string | null = null;
  stamp = 0;
  tenants: Map<string, number> | null = null;

  constructor(public label: string) {
    this.key = label.charCodeAt(0);
    this.len = label.length;
  }
}

/** Where a walk stopped: after `node` (at offset `at`), `k` characters into `child` if any. */
interface Stop {
  node: StringNode;
  child: StringNode | null;
  at: number;
  k: number;
}

/** A compressed character radix tree of tenants' text prefixes with LRU stamps. */
export class StringTree {
  /** Sink for each insert the policy makes, for the mesh; `apply` does not call it. */
  onInsert: ((text: string, tenant: string) => void) | undefined;
  readonly #core = new TreeCore(new StringNode(""));

  /** An empty tree. */
  constructor(options: StringTreeOptions = {}) {
    this.onInsert = options.onInsert;
  }

  /** Matches `text`, asks `tenantFor` whom to insert it for, inserts from where the walk stopped. */
  matchAndInsert(
    text: string,
    tenantFor: TenantChooser,
  ): { match: PrefixMatch; tenant: string | null } {
    const stop = this.#walk(text);
    const match = this.#result(text, stop);
    const tenant = tenantFor(match);
    if (tenant !== null) {
      this.#insertFrom(text, tenant, stop);
      this.onInsert?.(text, tenant);
    }
    return { match, tenant };
  }

  /** How much of `text` the tree holds, and who holds the deepest matched node (read-only). */
  match(text: string): PrefixMatch {
    return this.#result(text, this.#walk(text));
  }

  /** Records that `tenant` was sent `text` (calls `onInsert`). */
  insert(text: string, tenant: string): void {
    this.#insertFrom(text, tenant, this.#walk(text));
    this.onInsert?.(text, tenant);
  }

  /** Records a remote decision: `insert` without calling `onInsert`. */
  apply(text: string, tenant: string): void {
    this.#insertFrom(text, tenant, this.#walk(text));
  }

  /** The stamp of the latest insert (0 before any); `forgetBeyond` compares against it. */
  get stamp(): number {
    return this.#core.stamp;
  }

  /**
   * A worker reported holding only the first `depth` characters of `text`: `tenant` leaves the
   * branch of `text` beyond `depth` wherever it was last stamped before `before` (inserts since,
   * this text's own included, are kept: the worker now holds what it was sent since). An edge
   * that spans `depth` is split there. `stale` hears the full text of each of the tenant's leaves
   * in what is forgotten, and the depth from which it is forgotten. Returns the characters removed.
   */
  forgetBeyond(
    text: string,
    tenant: string,
    depth: number,
    before: number,
    stale?: (path: string, from: number) => void,
  ): number {
    let node = this.#core.root;
    let at = 0;
    while (at < text.length) {
      const child = childAt(node, text.charCodeAt(at));
      if (child === undefined || stampOf(child, tenant) === undefined) return 0;
      const len = child.len;
      const k = at + len <= depth
        ? (text.substring(at, at + len) === child.label ? len : 0)
        : commonPrefix(text, at, child.label);
      if (at + len <= depth) {
        if (k < len) return 0; // the tree's path leaves this text before `depth`
        node = child;
        at += len;
        continue;
      }
      // Unless `child` goes on along this text past `depth`, nothing of it lies beyond.
      if (k <= depth - at) return 0;
      if (depth > at) this.#split(node, child, depth - at); // `child` now starts at `depth`
      const leaves = stale && ((leaf: StringNode, from: number) => stale(pathTo(leaf), from));
      return this.#core.forgetStale(child, tenant, before, leaves);
    }
    return 0;
  }

  /**
   * Evicts least recently stamped tenant leaves until the size (with `only`: that tenant's) is
   * at most `budget`; chars removed.
   */
  evict(budget: number, only?: string): number {
    return this.#core.evict(budget, only);
  }

  /** Purges `tenant` from every node (its worker was removed). */
  removeTenant(tenant: string): void {
    this.#core.removeTenant(tenant);
  }

  /** Σ over nodes of edge length × tenants on it, in characters. */
  get size(): number {
    return this.#core.total;
  }

  /** Characters `tenant` holds (0 when unknown). */
  tenantSize(tenant: string): number {
    return this.#core.tenantSize(tenant);
  }

  /** Ids of the tenants the tree knows. */
  tenants(): string[] {
    return this.#core.tenants();
  }

  /** Nodes, root included. */
  get nodeCount(): number {
    return this.#core.nodeCount;
  }

  /**
   * Each tenant leaf's full text, oldest first (applying them in order rebuilds the tree with
   * its recency), or in tree order (`"path"`: consecutive texts share long prefixes; lazy, so
   * the tree may change between steps: leaves pruned meanwhile are skipped).
   */
  *export(order: "stamp" | "path" = "stamp"): Iterable<StringEntry> {
    const root = this.#core.root;
    for (const { node, tenant, stamp } of this.#core.leaves(order)) {
      let top: StringNode = node;
      while (top.parent !== null) top = top.parent;
      // A node pruned while a lazy walk was under way no longer reaches the root: skip it.
      if (top === root) yield { text: pathTo(node), tenant, stamp };
    }
  }

  /** Broken invariants found by walking the tree (sizes, links, keys); empty when sound. */
  audit(): string[] {
    return this.#core.audit((node) => {
      if (node.label.length === 0 || node.len !== node.label.length) return "bad edge length";
      return node.key === node.label.charCodeAt(0) ? null : "child under a stale key";
    });
  }

  #walk(text: string): Stop {
    let node = this.#core.root;
    let at = 0;
    const n = text.length;
    while (at < n) {
      const child = childAt(node, text.charCodeAt(at));
      if (child === undefined) break;
      const label = child.label;
      const len = label.length;
      // Substring equality is a memcmp in V8; startsWith compares char by char (~10x slower).
      if (len <= n - at && text.substring(at, at + len) === label) {
        node = child;
        at += len;
        continue;
      }
      return { node, child, at, k: commonPrefix(text, at, label) };
    }
    return { node, child: null, at, k: 0 };
  }

  #result(text: string, stop: Stop): PrefixMatch {
    const matched = stop.at + stop.k;
    const deepest = stop.child ?? stop.node;
    const tenants = matched > 0 ? this.#core.recent(deepest) : [];
    const core = this.#core;
    const depths = (since = 0) => core.depths(stop.node, stop.at, stop.child, stop.k, since);
    // Not enumerable: a match compares as its data.
    return Object.defineProperty({ matched, total: text.length, tenants }, "depths", {
      value: depths,
    }) as PrefixMatch;
  }

  #insertFrom(text: string, tenant: string, stop: Stop): void {
    const core = this.#core;
    const stamp = core.tick();
    core.attachPath(stop.node, tenant, stamp);
    let parent = stop.node;
    let at = stop.at;
    if (stop.child !== null) {
      parent = this.#split(parent, stop.child, stop.k);
      core.attach(parent, tenant, stamp);
      at += stop.k;
    }
    if (at < text.length) {
      const leaf = new StringNode(flat(text.slice(at)));
      core.add(parent, leaf);
      core.attach(leaf, tenant, stamp);
    }
  }

  /** Splits `child` of `parent` after `k` chars; returns the new intermediate (same tenants). */
  #split(parent: StringNode, child: StringNode, k: number): StringNode {
    const core = this.#core;
    const mid = new StringNode(flat(child.label.slice(0, k)));
    copyTenants(child, mid);
    core.replace(parent, child, mid);
    child.label = flat(child.label.slice(k));
    child.key = child.label.charCodeAt(0);
    child.len = child.label.length;
    linkChild(mid, child);
    return mid;
  }
}

/** The text from the root to the end of `node`. */
function pathTo(node: StringNode): string {
  let text = "";
  for (let x: StringNode | null = node; x !== null; x = x.parent) text = x.label + text;
  return text;
}

/**
 * Length of the common prefix of `label` and `text` from `at`, knowing they share the first
 * char and `text` does not hold all of `label` there: a short char loop (edges usually diverge
 * early), then a binary search over substring equalities (memcmp) for long shared runs.
 */
function commonPrefix(text: string, at: number, label: string): number {
  const max = Math.min(label.length, text.length - at);
  const quick = Math.min(max, 32);
  let k = 1;
  while (k < quick && label.charCodeAt(k) === text.charCodeAt(at + k)) k++;
  if (k < quick) return k;
  if (text.substring(at + k, at + max) === label.substring(k, max)) return max;
  // The first `lo` chars match; the first `hi` do not.
  let lo = k;
  let hi = max;
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (text.substring(at + lo, at + mid) === label.substring(lo, mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * A copy of `s` that does not share storage with a longer string: V8 flattens the cons string
 * into a new buffer of `s.length + 1` chars, and the slice points into that buffer.
 */
function flat(s: string): string {
  return (" " + s).slice(1);
}
