/**
 * `TokenTree`: cache_aware's approximate record of which tenants (worker ids) were sent which
 * token-id prefixes, as a page-aligned radix tree (SMG's kv_index `TokenTree`), mirroring an
 * engine's paged KV cache. In: token ids and the tenant chosen for each;
 * out: `PrefixMatch`es in tokens rounded down to whole pages, sizes, tenant-leaf entries.
 *
 * Inputs are truncated to whole pages (`pageSize`, `--block-size`); an input shorter than one
 * page matches nothing and is never inserted. Edges are whole pages; children are keyed by a
 * 30-bit hash of their first page, verified id by id on lookup (colliding pages chain through
 * `next`). Labels are `Uint32Array` copies (ids are taken as unsigned 32-bit, as in SMG).
 * Stamping, eviction and purge are `StringTree`'s (shared in tree_core.ts).
 */

import { TreeCore } from "./tree_core.ts";
import { childAt, copyTenants, type CoreNode, linkChild, stampOf } from "./tree_node.ts";
import type { PrefixMatch, TenantChooser, TokenEntry } from "./tree_types.ts";

/** Options of a `TokenTree`. */
export interface TokenTreeOptions {
  /** Tokens per page (`--block-size`); a positive integer, default 16. */
  pageSize?: number;
  /** Called after each insert the policy makes (not after `apply`); default none. */
  onInsert?: (tokens: readonly number[], tenant: string) => void;
}

class TokenNode implements CoreNode<TokenNode> {
  key: number;
  len: number;
  parent: TokenNode | null = null;
  child: TokenNode | null = null;
  children: Map<number, TokenNode> | null = null;
  next: TokenNode | null = null;
  tenant: string | null = null;
  stamp = 0;
  tenants: Map<string, number> | null = null;

  constructor(public label: Uint32Array, key: number) {
    this.key = key;
    this.len = label.length;
  }
}

/** Where a walk stopped: after `node` (at offset `at`), `k` tokens into `child` if any. */
interface Stop {
  node: TokenNode;
  child: TokenNode | null;
  at: number;
  k: number;
  /** The input length rounded down to whole pages. */
  end: number;
}

/** A page-aligned radix tree of tenants' token prefixes with LRU stamps. */
export class TokenTree {
  /** Tokens per page. */
  readonly pageSize: number;
  /** Sink for each insert the policy makes, for the mesh; `apply` does not call it. */
  onInsert: ((tokens: readonly number[], tenant: string) => void) | undefined;
  readonly #core = new TreeCore(new TokenNode(new Uint32Array(0), 0));

  /** An empty tree; throws a RangeError when `pageSize` is not a positive integer. */
  constructor(options: TokenTreeOptions = {}) {
    const pageSize = options.pageSize ?? 16;
    if (!Number.isInteger(pageSize) || pageSize < 1) {
      throw new RangeError(`page size must be a positive integer, got ${pageSize}`);
    }
    this.pageSize = pageSize;
    this.onInsert = options.onInsert;
  }

  /** Matches `tokens`, asks `tenantFor` whom to insert them for, inserts from where the walk stopped. */
  matchAndInsert(
    tokens: readonly number[],
    tenantFor: TenantChooser,
  ): { match: PrefixMatch; tenant: string | null } {
    const stop = this.#walk(tokens);
    const match = this.#result(tokens, stop);
    const tenant = tenantFor(match);
    if (tenant !== null && stop.end > 0) {
      this.#insertFrom(tokens, tenant, stop);
      this.onInsert?.(tokens, tenant);
    }
    return { match, tenant };
  }

  /** How much of `tokens` the tree holds (whole pages), and who holds it (read-only). */
  match(tokens: readonly number[]): PrefixMatch {
    return this.#result(tokens, this.#walk(tokens));
  }

  /** Records that `tenant` was sent `tokens` (calls `onInsert`); shorter than a page: nothing. */
  insert(tokens: readonly number[], tenant: string): void {
    const stop = this.#walk(tokens);
    if (stop.end === 0) return;
    this.#insertFrom(tokens, tenant, stop);
    this.onInsert?.(tokens, tenant);
  }

  /** Records a remote decision: `insert` without calling `onInsert`. */
  apply(tokens: readonly number[], tenant: string): void {
    const stop = this.#walk(tokens);
    if (stop.end > 0) this.#insertFrom(tokens, tenant, stop);
  }

  /** The stamp of the latest insert (0 before any); `forgetBeyond` compares against it. */
  get stamp(): number {
    return this.#core.stamp;
  }

  /**
   * A worker reported holding only the first `depth` tokens of `tokens` (rounded down to whole
   * pages): `tenant` leaves the branch of `tokens` beyond it wherever it was last stamped before
   * `before` (inserts since, these tokens' own included, are kept). An edge that spans the depth
   * is split there. `stale` hears the full token path of each of the tenant's leaves in what is
   * forgotten, and the depth from which it is forgotten. Returns the tokens removed.
   */
  forgetBeyond(
    tokens: readonly number[],
    tenant: string,
    depth: number,
    before: number,
    stale?: (path: number[], from: number) => void,
  ): number {
    const page = this.pageSize;
    const end = tokens.length - tokens.length % page;
    const cut = depth - depth % page;
    let node = this.#core.root;
    let at = 0;
    while (at < end) {
      let child = childAt(node, pageKey(tokens, at, page));
      while (child !== undefined && !samePage(child.label, tokens, at, page)) {
        child = child.next ?? undefined;
      }
      if (child === undefined || stampOf(child, tenant) === undefined) return 0;
      const label = child.label;
      const max = Math.min(label.length, end - at);
      let m = page;
      while (m < max && label[m] === tokens[at + m]) m++;
      const k = m - m % page;
      if (at + label.length <= cut) {
        if (k < label.length) return 0; // the tree's path leaves these tokens before the cut
        node = child;
        at += label.length;
        continue;
      }
      // Unless `child` goes on along these tokens past the cut, nothing of it lies beyond.
      if (k <= cut - at) return 0;
      if (cut > at) this.#split(node, child, cut - at); // `child` now starts at the cut
      const leaves = stale && ((leaf: TokenNode, from: number) => stale(pathTo(leaf), from));
      return this.#core.forgetStale(child, tenant, before, leaves);
    }
    return 0;
  }

  /**
   * Evicts least recently stamped tenant leaves until the size (with `only`: that tenant's) is
   * at most `budget`; tokens removed.
   */
  evict(budget: number, only?: string): number {
    return this.#core.evict(budget, only);
  }

  /** Purges `tenant` from every node (its worker was removed). */
  removeTenant(tenant: string): void {
    this.#core.removeTenant(tenant);
  }

  /** Σ over nodes of edge length × tenants on it, in tokens. */
  get size(): number {
    return this.#core.total;
  }

  /** Tokens `tenant` holds (0 when unknown). */
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
   * Each tenant leaf's full token path, oldest first (applying them in order rebuilds the tree
   * with its recency), or in tree order (`"path"`: consecutive paths share long prefixes; lazy,
   * so the tree may change between steps: leaves pruned meanwhile are skipped).
   */
  *export(order: "stamp" | "path" = "stamp"): Iterable<TokenEntry> {
    const root = this.#core.root;
    for (const { node, tenant, stamp } of this.#core.leaves(order)) {
      let top: TokenNode = node;
      while (top.parent !== null) top = top.parent;
      // A node pruned while a lazy walk was under way no longer reaches the root: skip it.
      if (top === root) yield { tokens: pathTo(node), tenant, stamp };
    }
  }

  /** Broken invariants found by walking the tree (sizes, links, keys); empty when sound. */
  audit(): string[] {
    const page = this.pageSize;
    return this.#core.audit((node) => {
      const len = node.label.length;
      if (len === 0 || len % page !== 0 || node.len !== len) return "edge not whole pages";
      return node.key === pageKey(node.label, 0, page) ? null : "child under a stale key";
    });
  }

  #walk(tokens: readonly number[]): Stop {
    const page = this.pageSize;
    const end = tokens.length - tokens.length % page;
    let node = this.#core.root;
    let at = 0;
    while (at < end) {
      let child = childAt(node, pageKey(tokens, at, page));
      while (child !== undefined && !samePage(child.label, tokens, at, page)) {
        child = child.next ?? undefined;
      }
      if (child === undefined) break;
      const label = child.label;
      const max = Math.min(label.length, end - at);
      let m = page;
      while (m < max && label[m] === tokens[at + m]) m++;
      if (m === label.length) {
        node = child;
        at += m;
        continue;
      }
      return { node, child, at, k: m - m % page, end };
    }
    return { node, child: null, at, k: 0, end };
  }

  #result(tokens: readonly number[], stop: Stop): PrefixMatch {
    const matched = stop.at + stop.k;
    const deepest = stop.child ?? stop.node;
    const tenants = matched > 0 ? this.#core.recent(deepest) : [];
    const core = this.#core;
    const depths = (since = 0) => core.depths(stop.node, stop.at, stop.child, stop.k, since);
    // Not enumerable: a match compares as its data.
    return Object.defineProperty({ matched, total: tokens.length, tenants }, "depths", {
      value: depths,
    }) as PrefixMatch;
  }

  #insertFrom(tokens: readonly number[], tenant: string, stop: Stop): void {
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
    if (at < stop.end) {
      const label = new Uint32Array(stop.end - at);
      for (let i = 0; i < label.length; i++) label[i] = tokens[at + i];
      const leaf = new TokenNode(label, pageKey(label, 0, this.pageSize));
      core.add(parent, leaf);
      core.attach(leaf, tenant, stamp);
    }
  }

  /** Splits `child` of `parent` after `k` tokens (whole pages); returns the new intermediate. */
  #split(parent: TokenNode, child: TokenNode, k: number): TokenNode {
    const core = this.#core;
    const mid = new TokenNode(child.label.slice(0, k), child.key);
    copyTenants(child, mid);
    core.replace(parent, child, mid);
    child.label = child.label.slice(k);
    child.key = pageKey(child.label, 0, this.pageSize);
    child.len = child.label.length;
    linkChild(mid, child);
    return mid;
  }
}

/** The token ids from the root to the end of `node`. */
function pathTo(node: TokenNode): number[] {
  const labels: Uint32Array[] = [];
  for (let x: TokenNode | null = node; x !== null; x = x.parent) labels.push(x.label);
  const tokens: number[] = [];
  for (let i = labels.length - 1; i >= 0; i--) for (const id of labels[i]) tokens.push(id);
  return tokens;
}

/** A 30-bit hash (a small-integer Map key) of the page of `ids` at `at`; exported for tests. */
export function pageKey(ids: ArrayLike<number>, at: number, page: number): number {
  let h = 0x811c9dc5 ^ page;
  for (let i = at; i < at + page; i++) {
    h = Math.imul(h ^ ids[i], 0x01000193);
    h ^= h >>> 15;
  }
  return (h ^ (h >>> 13)) & 0x3fffffff;
}

/** Whether `label` starts with the page of `tokens` at `at`. */
function samePage(
  label: Uint32Array,
  tokens: readonly number[],
  at: number,
  page: number,
): boolean {
  for (let i = 0; i < page; i++) if (label[i] !== tokens[at + i]) return false;
  return true;
}
