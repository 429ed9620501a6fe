/**
 * The policies' side of state sharing between routers: every cache-aware policy (the default,
 * per-model ones created later, and the PD legs') and every pin map (sticky sessions, `manual`)
 * registers here when built, so the mesh adapters (`lib/mesh/adapters/`) can publish their
 * decisions and apply their peers' without the policies importing the mesh. With no mesh, the
 * sinks stay null and nothing is hashed or recorded beyond what routing needs.
 */

import type { Policy } from "./policy.ts";
import type { TreeKind } from "./cache_aware/shared_paths.ts";

/** Which policy of a router a tree belongs to: the model's policy, or a PD leg's. */
export type TreeRole = "main" | "prefill" | "decode";

/** One entry of a tree as a repair ships it: a whole path, or a placement's hash. */
export type TreeEntry =
  | { path: string; tenants: readonly string[] }
  | { tokens: readonly number[]; tenants: readonly string[] }
  | { hash: number; tenants: readonly string[] };

/** What a cache-aware policy offers to tree sync. */
export interface SharedTrees {
  /** Records a peer's decision; returns whether the path was already known here. */
  applyDelta(model: string, kind: TreeKind, hash: number, tenant: string): boolean;
  /**
   * The model's tree of `kind`, lazily: paths in tree order (depth first, each built when
   * reached), then placements (listed when the iteration starts).
   */
  exportTree(model: string, kind: TreeKind): Iterable<TreeEntry>;
  /** Replays one exported entry. */
  applyEntry(model: string, kind: TreeKind, entry: TreeEntry): void;
  /** The models and kinds whose tree or placements are not empty. */
  heldTrees(): { model: string; kind: TreeKind }[];
}

/** Hears each decision a shared tree makes. */
export type DeltaSink = (
  role: TreeRole,
  model: string,
  kind: TreeKind,
  hash: number,
  tenant: string,
) => void;

/** Which pin map a pin belongs to. */
export type PinScope = "sticky" | "manual";

/** What a pin map offers to pin sync: workers by URL, primary first. */
export interface SharedPins {
  /** Sets `key`'s workers as a peer decided them (no sink call). */
  applyPin(key: string, urls: readonly string[]): void;
  /** Whether the map holds `key` (pinned and not idle). */
  holds(key: string): boolean;
}

/** Hears each pin change a pin map makes. */
export type PinSink = (scope: PinScope, key: string, urls: readonly string[]) => void;

/** The registry of shared policy state of one router. */
export class PolicyReplicas {
  /** Set by tree sync: hears every shared tree's decisions. */
  deltaSink: DeltaSink | null = null;
  /** Set by pin sync: hears every pin map's changes. */
  pinSink: PinSink | null = null;
  /** Set by pin sync: hears every use of a pinned key. */
  pinUsed: PinSink | null = null;
  /** The policy routing a model (set by the composition root); default none. */
  mainFor: (model: string) => Policy | null = () => null;
  readonly #trees = new Map<Policy, { role: TreeRole; trees: SharedTrees }>();
  readonly #pins = new Map<PinScope, SharedPins[]>();

  /** A cache-aware policy joins (at construction). */
  addTrees(policy: Policy & SharedTrees, role: TreeRole): void {
    this.#trees.set(policy, { role, trees: policy });
  }

  /** A pin map joins (at construction). */
  addPins(scope: PinScope, pins: SharedPins): void {
    const list = this.#pins.get(scope) ?? [];
    list.push(pins);
    this.#pins.set(scope, list);
  }

  /** Pin maps of `scope`. */
  pins(scope: PinScope): readonly SharedPins[] {
    return this.#pins.get(scope) ?? [];
  }

  /** Whether any cache-aware policy takes part. */
  get hasTrees(): boolean {
    return this.#trees.size > 0;
  }

  /** Every shared tree's policy with its role. */
  allTrees(): { role: TreeRole; trees: SharedTrees }[] {
    return [...this.#trees.values()];
  }

  /** The shared trees that route `model` in `role`, or null (not cache-aware there). */
  treesFor(role: TreeRole, model: string): SharedTrees | null {
    if (role === "main") {
      let p = this.mainFor(model);
      const inner = (p as { inner?: Policy } | null)?.inner;
      if (p !== null && !this.#trees.has(p) && inner) p = inner;
      return p === null ? null : this.#trees.get(p)?.trees ?? null;
    }
    for (const e of this.#trees.values()) if (e.role === role) return e.trees;
    return null;
  }
}
