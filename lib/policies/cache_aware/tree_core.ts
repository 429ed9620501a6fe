/**
 * What the string and token radix trees share: tenants on nodes, size accounting, the LRU
 * clock, LRU eviction of tenant leaves, tenant purge and leaf listing. The trees own the edge
 * labels (matching, splitting, inserting); this core never reads them.
 *
 * Invariants kept here: a tenant on a node is on its parent too (inserts stamp the whole path,
 * eviction removes only tenant leaves), so every non-root node has at least one tenant and a
 * node without tenants is pruned. Sizes: per tenant and in total, Σ over nodes of edge length ×
 * tenants on it. Stamps come from a tree-wide counter, never wall time (single-threaded: no
 * locks or epochs). Known gap: a node left with one child after a prune is not merged with it,
 * which costs a node but changes no match result.
 */

import { MinHeap } from "../../core/min_heap.ts";
import {
  childrenOf,
  type CoreNode,
  dropTenant,
  forEachTenant,
  hasChildWith,
  linkChild,
  setStamp,
  stampOf,
  tenantCount,
  unlinkChild,
} from "./tree_node.ts";
import { MAX_MATCHED_TENANTS } from "./tree_types.ts";

/** A tenant on a node, with its stamp. */
export interface TenantLeaf<N> {
  /** The node. */
  readonly node: N;
  /** The tenant on it. */
  readonly tenant: string;
  /** Its stamp. */
  readonly stamp: number;
}

/** Tenant bookkeeping, sizes and eviction for one tree whose root is `root`. */
export class TreeCore<N extends CoreNode<N>> {
  /** The root: empty edge, never evicted. */
  readonly root: N;
  #clock = 0;
  #total = 0;
  #nodes = 1;
  readonly #sizes = new Map<string, number>();

  /** A core for a tree whose root is `root`. */
  constructor(root: N) {
    this.root = root;
  }

  /** A fresh stamp, larger than every earlier one. */
  tick(): number {
    return ++this.#clock;
  }

  /** The last stamp given (0 before any). */
  get stamp(): number {
    return this.#clock;
  }

  /** Σ over nodes of edge length × tenants on it. */
  get total(): number {
    return this.#total;
  }

  /** Nodes in the tree, root included. */
  get nodeCount(): number {
    return this.#nodes;
  }

  /** Units the tenant holds (0 when unknown). */
  tenantSize(tenant: string): number {
    return this.#sizes.get(tenant) ?? 0;
  }

  /** Ids of the tenants the tree knows. */
  tenants(): string[] {
    return [...this.#sizes.keys()];
  }

  /** Puts `tenant` on `node` with `stamp`, counting the edge if the tenant is new there. */
  attach(node: N, tenant: string, stamp: number): void {
    if (setStamp(node, tenant, stamp)) {
      this.#sizes.set(tenant, (this.#sizes.get(tenant) ?? 0) + node.len);
      this.#total += node.len;
    }
  }

  /** Attaches `tenant` with `stamp` to `node` and every ancestor up to the root. */
  attachPath(node: N, tenant: string, stamp: number): void {
    for (let x: N | null = node; x !== null; x = x.parent) this.attach(x, tenant, stamp);
  }

  /** Hangs the new node `child` under `parent`. */
  add(parent: N, child: N): void {
    linkChild(parent, child);
    this.#nodes++;
  }

  /** Puts the new node `mid` in `child`'s place under `parent`; `child` must then be re-hung. */
  replace(parent: N, child: N, mid: N): void {
    unlinkChild(parent, child);
    this.add(parent, mid);
  }

  /** Tenants of `node`, most recent first, at most `MAX_MATCHED_TENANTS`. */
  recent(node: N): string[] {
    if (node.tenants === null) return node.tenant === null ? [] : [node.tenant];
    const ids: string[] = [];
    const stamps: number[] = [];
    node.tenants.forEach((stamp, tenant) => {
      let j: number;
      if (ids.length < MAX_MATCHED_TENANTS) {
        j = ids.length;
        ids.push(tenant);
        stamps.push(stamp);
      } else if (stamp > stamps[MAX_MATCHED_TENANTS - 1]) {
        j = MAX_MATCHED_TENANTS - 1;
      } else return;
      while (j > 0 && stamps[j - 1] < stamp) {
        ids[j] = ids[j - 1];
        stamps[j] = stamps[j - 1];
        j--;
      }
      ids[j] = tenant;
      stamps[j] = stamp;
    });
    return ids;
  }

  /**
   * Each tenant's matched depth along a walk that ended under `node` (at depth `at`) having
   * matched `k` more units into `child`: the depth of the deepest matched node it is on (stamped
   * `since` or later). Tenants on no such node are absent (depth 0).
   */
  depths(node: N, at: number, child: N | null, k: number, since = 0): Map<string, number> {
    const out = new Map<string, number>();
    if (child !== null && k > 0) {
      forEachTenant(child, (stamp, t) => {
        if (stamp >= since) out.set(t, at + k);
      });
    }
    let depth = at;
    for (let x: N | null = node; x !== null && x !== this.root; x = x.parent) {
      forEachTenant(x, (stamp, t) => {
        if (stamp >= since && !out.has(t)) out.set(t, depth);
      });
      depth -= x.len;
    }
    return out;
  }

  /**
   * While the total exceeds `budget` (with `only`: while that tenant holds more), removes the
   * least recently stamped tenant leaf (of `only`; a tenant on a node and on none of its
   * children), pruning nodes left empty; a parent that becomes a tenant leaf joins the queue.
   * The root is never evicted. Returns the units removed.
   */
  evict(budget: number, only?: string): number {
    const over = only === undefined
      ? () => this.#total > budget
      : () => (this.#sizes.get(only) ?? 0) > budget;
    if (!over()) return 0;
    const heap = new MinHeap<TenantLeaf<N>>((a, b) => a.stamp < b.stamp);
    for (const leaf of this.#tenantLeaves(false)) {
      if (only === undefined || leaf.tenant === only) heap.push(leaf);
    }
    let removed = 0;
    while (over()) {
      const leaf = heap.pop();
      if (leaf === undefined) break;
      const { node, tenant } = leaf;
      const parent = node.parent;
      if (parent === null || !dropTenant(node, tenant)) continue; // already gone
      this.#sizes.set(tenant, this.#sizes.get(tenant)! - node.len);
      this.#total -= node.len;
      removed += node.len;
      if (tenantCount(node) === 0) this.#prune(parent, node);
      const stamp = stampOf(parent, tenant);
      if (parent !== this.root && stamp !== undefined && !hasChildWith(parent, tenant)) {
        heap.push({ node: parent, tenant, stamp });
      }
    }
    return removed;
  }

  /** Removes `tenant` from every node (root included) and forgets it. */
  removeTenant(tenant: string): void {
    const size = this.#sizes.get(tenant);
    if (size === undefined) return;
    dropTenant(this.root, tenant);
    const stack: N[] = [this.root];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      for (const child of childrenOf(node)) {
        if (stampOf(child, tenant) === undefined) continue;
        // Children's tenants are a subset of their parent's: a sole owner owns the subtree.
        if (tenantCount(child) === 1) this.#prune(node, child);
        else {
          dropTenant(child, tenant);
          stack.push(child);
        }
      }
    }
    this.#total -= size;
    this.#sizes.delete(tenant);
  }

  /**
   * Removes `tenant` from `start` and every node below it that the tenant last touched before
   * stamp `before` (a node stamped later is kept, with its path), pruning nodes left without
   * tenants. Stamps never grow going down a path, so what is removed is whole subtrees and the
   * tenants stay nested. `stale` hears, before each removal, the tenant's leaves in the subtree
   * removed and the depth at which that subtree starts (what the tenant still holds of their
   * paths). Returns the units removed.
   */
  forgetStale(
    start: N,
    tenant: string,
    before: number,
    stale?: (leaf: N, from: number) => void,
  ): number {
    let removed = 0;
    const stack: N[] = [start];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      const stamp = stampOf(node, tenant);
      if (stamp === undefined) continue;
      if (stamp >= before) {
        for (const child of childrenOf(node)) stack.push(child);
        continue;
      }
      // Stale here, so stale on the whole subtree: the tenant leaves all of it.
      if (stale) this.#staleLeaves(node, tenant, stale);
      const sub: N[] = [node];
      for (let x = sub.pop(); x !== undefined; x = sub.pop()) {
        if (!dropTenant(x, tenant)) continue;
        removed += x.len;
        for (const child of childrenOf(x)) sub.push(child);
      }
      if (tenantCount(node) === 0 && node.parent !== null) this.#prune(node.parent, node);
      else this.#pruneEmpty(node);
    }
    this.#sizes.set(tenant, (this.#sizes.get(tenant) ?? 0) - removed);
    this.#total -= removed;
    return removed;
  }

  /**
   * Every tenant leaf (root tenants on no child included): oldest stamp first, or in tree
   * order (`"path"`, depth first: consecutive leaves share their paths down to their common
   * ancestor), lazily.
   */
  leaves(order: "stamp" | "path" = "stamp"): Iterable<TenantLeaf<N>> {
    if (order === "path") return this.#tenantLeaves(true);
    return [...this.#tenantLeaves(true)].sort((a, b) => a.stamp - b.stamp);
  }

  /**
   * Walks the tree and lists broken invariants (sizes, node count, parent links, tenant
   * nesting, empty nodes, and whatever `check` finds on each non-root node, e.g. a stale key);
   * empty when the tree is sound. For tests and debugging.
   */
  audit(check: (node: N) => string | null): string[] {
    const problems: string[] = [];
    const sizes = new Map<string, number>();
    let total = 0;
    let nodes = 0;
    const stack: N[] = [this.root];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      nodes++;
      forEachTenant(node, (_, t) => {
        sizes.set(t, (sizes.get(t) ?? 0) + node.len);
        total += node.len;
      });
      if (node.tenants !== null && node.tenants.size < 2) problems.push("tenant Map under 2");
      if (node.children !== null && node.child !== null) problems.push("child and children");
      if (node !== this.root && tenantCount(node) === 0) problems.push("node without tenants");
      for (const child of childrenOf(node)) {
        if (child.parent !== node) problems.push("broken parent link");
        const problem = check(child);
        if (problem !== null) problems.push(problem);
        forEachTenant(child, (_, t) => {
          if (stampOf(node, t) === undefined) problems.push(`${t} on a child, not its parent`);
        });
        stack.push(child);
      }
    }
    if (total !== this.#total) problems.push(`total ${this.#total}, walked ${total}`);
    if (nodes !== this.#nodes) problems.push(`nodeCount ${this.#nodes}, walked ${nodes}`);
    for (const [t, size] of this.#sizes) {
      if ((sizes.get(t) ?? 0) !== size) {
        problems.push(`size of ${t} ${size}, walked ${sizes.get(t)}`);
      }
    }
    for (const t of sizes.keys()) if (!this.#sizes.has(t)) problems.push(`unknown tenant ${t}`);
    return problems;
  }

  /** Calls `visit` with each of `tenant`'s leaves under `top` and the depth where `top` starts. */
  #staleLeaves(top: N, tenant: string, visit: (leaf: N, from: number) => void): void {
    let from = 0;
    for (let x = top.parent; x !== null; x = x.parent) from += x.len;
    const stack: N[] = [top];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      let leaf = true;
      for (const child of childrenOf(node)) {
        if (stampOf(child, tenant) === undefined) continue;
        leaf = false;
        stack.push(child);
      }
      if (leaf) visit(node, from);
    }
  }

  /** Prunes the nodes left without tenants below `node` (whole subtrees: tenants nest). */
  #pruneEmpty(node: N): void {
    const stack: N[] = [node];
    for (let x = stack.pop(); x !== undefined; x = stack.pop()) {
      for (const child of childrenOf(x)) {
        if (tenantCount(child) === 0) this.#prune(x, child);
        else stack.push(child);
      }
    }
  }

  /** Cuts `child` (and its subtree) from `parent`, uncounting its nodes. */
  #prune(parent: N, child: N): void {
    unlinkChild(parent, child);
    child.parent = null;
    const stack: N[] = [child];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      this.#nodes--;
      for (const c of childrenOf(node)) stack.push(c);
    }
  }

  /** Tenant leaves in depth-first order; the root's only when `withRoot`. */
  *#tenantLeaves(withRoot: boolean): Generator<TenantLeaf<N>> {
    const stack: N[] = [this.root];
    const found: TenantLeaf<N>[] = [];
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      if (node !== this.root || withRoot) {
        forEachTenant(node, (stamp, tenant) => {
          if (!hasChildWith(node, tenant)) found.push({ node, tenant, stamp });
        });
        yield* found;
        found.length = 0;
      }
      for (const c of childrenOf(node)) stack.push(c);
    }
  }
}
