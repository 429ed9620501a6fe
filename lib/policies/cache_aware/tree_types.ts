/**
 * Types shared by the cache_aware radix trees (`StringTree`, `TokenTree`) and the policy that
 * reads them: what a prefix match reports, how the policy chooses the tenant to insert for, and
 * what a tree exports for the mesh to rebuild it elsewhere.
 */

/** Most tenants a `PrefixMatch` lists (SMG's `matched_tenants` cap). */
export const MAX_MATCHED_TENANTS = 8;

/** How much of an input a tree already holds, and who holds it. */
export interface PrefixMatch {
  /** Matched units (characters, or tokens rounded down to whole pages). */
  readonly matched: number;
  /** Units in the whole input (the match ratio is `matched / total`). */
  readonly total: number;
  /** Tenants of the deepest matched node, most recent first, at most 8; empty when nothing matched. */
  readonly tenants: string[];
  /**
   * Every tenant's own matched units (absent: none), counting only what it was sent at tree stamp
   * `since` or later (default: all), computed on call; valid until the tree changes (so within a
   * `TenantChooser`, before the insert).
   */
  depths(since?: number): ReadonlyMap<string, number>;
}

/** Picks the tenant to insert the input for, given its match; null inserts nothing. */
export type TenantChooser = (match: PrefixMatch) => string | null;

/** One tenant leaf of a `StringTree`: the full text to it, its tenant and its LRU stamp. */
export interface StringEntry {
  /** The path from the root. */
  readonly text: string;
  /** The tenant (worker id). */
  readonly tenant: string;
  /** The tenant's last-access stamp on that node (larger is more recent). */
  readonly stamp: number;
}

/** One tenant leaf of a `TokenTree`: the full token path to it, its tenant and its LRU stamp. */
export interface TokenEntry {
  /** The path from the root (whole pages). */
  readonly tokens: number[];
  /** The tenant (worker id). */
  readonly tenant: string;
  /** The tenant's last-access stamp on that node (larger is more recent). */
  readonly stamp: number;
}
