/**
 * The policy interface. A policy chooses one worker among eligible candidates; eligibility
 * (ready, breaker, overload, model) was decided before it runs, so a policy never filters for
 * health. Policies read only `WorkerView` and `RouteRequest`, take randomness and time as
 * inputs, and import nothing from workers, proxy or mesh.
 */

import type { PolicyName } from "../config/config.ts";
import type { RouteRequest, SelectionNote, WorkerView } from "../core/types.ts";

/** What a policy reads beyond the candidate list; the router supplies only what is declared. */
export interface PolicyNeeds {
  /** Routing text or token ids. */
  requestText: boolean;
  /** Backend load reports (the load monitor keeps polling for it). */
  backendLoads: boolean;
}

/** A load-balancing policy. */
export interface Policy {
  /** SMG's policy name, used in metrics labels. */
  readonly name: PolicyName;
  /** What the policy reads. */
  readonly needs: PolicyNeeds;
  /**
   * Picks one of `candidates` (all eligible), or null when it declines or there are none.
   * Must return an element of `candidates`. A policy that knows more about its pick than the
   * router (the tokens the worker must prefill, the tokens it should find cached) writes it in
   * `note`.
   */
  select<W extends WorkerView>(
    candidates: readonly W[],
    request: RouteRequest,
    note?: SelectionNote,
  ): W | null;
  /** Forgets per-worker state when a worker leaves the registry. */
  onWorkerRemoved?(workerId: string): void;
}

/** Where policies report their decisions (wired to metrics by the composition root). */
/**
 * The branch of the latest decision (any policy's), written by the observer as the policy reports
 * it, read by the router right after the `select` it cleared it for: a decision is made without an
 * await, so nothing comes between.
 */
export interface LastDecision {
  branch: string | null;
}

export interface PolicyObserver {
  /** A decision `branch` of `policy` (e.g. manual `occupied_hit`, consistent_hashing `ring_hit`). */
  decision(policy: string, branch: string): void;
  /** The sticky map (manual or the override) now holds `n` keys. */
  stickyEntries(n: number): void;
  /** Sticky sessions pinned on a key from the body `rid` or from a header. */
  keySource(source: "rid" | "header"): void;
  /** A prefix-aware policy's matched share of a request, 0..1. */
  matchRatio?(policy: string, ratio: number): void;
  /** A cache tree's size (characters or tokens) and tenant count after eviction. */
  treeSize?(model: string, tree: "string" | "token", size: number, tenants: number): void;
  /** Keys in a model's hash index after a sweep. */
  placements?(model: string, entries: number): void;
  /** A tree forgot `units` a worker no longer held, after its answer reported less cached. */
  treeCorrection?(model: string, tree: "string" | "token", units: number): void;
}

/** An observer that records nothing (tests, benches). */
export const NO_OBSERVER: PolicyObserver = {
  decision: () => {},
  stickyEntries: () => {},
  keySource: () => {},
};

/** Declares that a policy reads neither text nor loads. */
export const NEEDS_NOTHING: PolicyNeeds = { requestText: false, backendLoads: false };
