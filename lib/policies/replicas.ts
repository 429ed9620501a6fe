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

/**
 * A worker's part of a tree branch that a router forgot on the worker's own report (tree
 * feedback), as the mesh shares it. A relay (no branch) names only placements: those a router
 * dropped because its own tree forgot their paths on receiving a correction.
 */
export interface TreeCorrection {
  /** Names the correction across the mesh (tree sync gives it when publishing). */
  id: string;
  /** The worker's URL. */
  worker: string;
  /**
   * The request's path up to `kept` and one unit (text) or page (token ids) beyond it, which
   * picks the branch; null for a relay.
   */
  branch: string | readonly number[] | null;
  /** Units of the branch the worker still holds. */
  kept: number;
  /** Hashes of paths the worker no longer holds: placements to drop it from. */
  hashes: readonly number[];
  /** Milliseconds since the request that revealed it was routed: what was recorded before is stale. */
  ageMs: number;
}

/** A correction before tree sync names it. */
export type NewCorrection = Omit<TreeCorrection, "id">;

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
  /**
   * Applies a peer's correction, once per id; returns the relay to publish (the placements of
   * the paths this router's own tree forgot with it), or null.
   */
  applyCorrection(model: string, kind: TreeKind, c: TreeCorrection): NewCorrection | null;
  /** The corrections of a tree still remembered, ages as of now (for a repair to carry). */
  corrections(model: string, kind: TreeKind): TreeCorrection[];
}

/** Hears each decision a shared tree makes. */
export type DeltaSink = (
  role: TreeRole,
  model: string,
  kind: TreeKind,
  hash: number,
  tenant: string,
) => void;

/** Hears each correction a shared tree makes; returns the id it is published under. */
export type CorrectionSink = (
  role: TreeRole,
  model: string,
  kind: TreeKind,
  c: NewCorrection,
) => string;

/**
 * Which pin maps a pin belongs to: sticky sessions or `manual`, of the model's policy
 * (`sticky`, `manual`) or of a PD leg (`sticky.prefill`, `manual.decode`, ...).
 */
export type PinScope = string;

/** The scope of a pin map of `kind` in a policy of `role`. */
export function pinScope(kind: "sticky" | "manual", role: TreeRole = "main"): PinScope {
  return role === "main" ? kind : `${kind}.${role}`;
}

/** Whether `s` names a pin scope. */
export function isPinScope(s: string): boolean {
  return /^(sticky|manual)(\.(prefill|decode))?$/.test(s);
}

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
  /** Set by tree sync: hears every shared tree's corrections (tree feedback). */
  correctionSink: CorrectionSink | null = null;
  /** Set by pin sync: hears every pin map's changes. */
  pinSink: PinSink | null = null;
  /** Set by pin sync: hears every use of a pinned key. */
  pinUsed: PinSink | null = null;
  /** The policy routing a model (set by the composition root); default none. */
  mainFor: (model: string) => Policy | null = () => null;
  readonly #trees = new Map<Policy, { role: TreeRole; trees: SharedTrees }>();
  readonly #pins = new Map<PinScope, { owner: Policy; pins: SharedPins }[]>();

  /** A cache-aware policy joins with its shared trees (at construction). */
  addTrees(policy: Policy, trees: SharedTrees, role: TreeRole): void {
    this.#trees.set(policy, { role, trees });
  }

  /** A pin map of policy `owner` joins (at construction). */
  addPins(scope: PinScope, pins: SharedPins, owner: Policy): void {
    const list = this.#pins.get(scope) ?? [];
    list.push({ owner, pins });
    this.#pins.set(scope, list);
  }

  /**
   * The pin maps a pin of `scope` for `model` goes to: the model's policy's for the main
   * scopes (its sticky wrapper, or `manual` itself), every one of the scope for a PD leg's.
   */
  pinsFor(scope: PinScope, model: string): SharedPins[] {
    const list = this.#pins.get(scope) ?? [];
    if (scope.includes(".")) return list.map((e) => e.pins);
    const p = this.mainFor(model);
    return list.filter((e) => e.owner === p).map((e) => e.pins);
  }

  /** Every pin map of `scope` (for expiry). */
  pins(scope: PinScope): SharedPins[] {
    return (this.#pins.get(scope) ?? []).map((e) => e.pins);
  }

  /** Scopes with pin maps. */
  pinScopes(): PinScope[] {
    return [...this.#pins.keys()];
  }

  /** A policy instance was dropped (its model's last worker left): forget its state. */
  remove(policy: Policy): void {
    this.#trees.delete(policy);
    const inner = (policy as { inner?: Policy }).inner;
    if (inner) this.#trees.delete(inner);
    for (const [scope, list] of this.#pins) {
      this.#pins.set(scope, list.filter((e) => e.owner !== policy));
    }
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
