/**
 * Sticky sessions (`--routing-key-override`, alias `--sticky-sessions`): a wrapper that pins
 * each conversation to a worker on top of the configured policy. In: the candidates and the
 * request's sticky key (body `rid` key, else the routing-key header; both turn-suffix stripped);
 * out: the pinned worker, or the inner policy's pick (then pinned). A request without a key goes
 * to the inner policy untouched. `manual` and `consistent_hashing` honour keys themselves and
 * are never wrapped (`stickyAppliesTo`).
 *
 * Per-key in-flight cap (SMG's `select_sticky`): while the pinned worker already has
 * `STICKY_INFLIGHT_CAP` requests of this key in flight, the request respills: the inner policy
 * (or the `--assignment-mode`, when one is set) picks again among all candidates, and the pin
 * moves only when that pick is another worker still under the cap (`cap_respill`). Other traffic
 * on the worker never causes a respill. Unpinned keys: delegate mode asks the inner policy and
 * makes its pick the primary (`occupied_miss` when the old pin was unavailable, else `vacant`);
 * other modes place like `manual` (appended as second worker).
 *
 * Departures: keys are scoped by model; if the inner policy declines a respill the request stays
 * on its pin instead of failing; pins name worker ids and a removed worker is dropped from them.
 * Idle keys expire after `--max-idle-secs`, swept lazily from `select` at most once per
 * `--eviction-interval` (no timer); `sweep(now)` is exposed. Decisions are reported under the
 * policy name `sticky` (mapped to `smg_manual_policy_branch_total`). Known gap: no PD leg keys.
 */

import type { AssignmentMode, PolicyName } from "../config/config.ts";
import type { RouteRequest, SelectionNote, WorkerView } from "../core/types.ts";
import { assignWorker } from "./assignment.ts";
import { NO_OBSERVER, type Policy, type PolicyObserver } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";
import { sharedStickyMap, type StickyMap, stickyMapKey } from "./sticky_map.ts";

/** Requests of one key in flight on its pinned worker before the next one respills. */
export const STICKY_INFLIGHT_CAP = 2;

/** Decision branches of sticky sessions (`smg_manual_policy_branch_total` labels). */
export type StickyBranch =
  | "no_healthy_workers"
  | "occupied_hit"
  | "occupied_miss"
  | "vacant"
  | "cap_respill";

/** Whether sticky sessions wrap policy `name` (all but the key-native manual and consistent_hashing). */
export function stickyAppliesTo(name: PolicyName): boolean {
  return name !== "manual" && name !== "consistent_hashing";
}

/** Pins keyed requests on top of an inner policy. */
export class StickySessions implements Policy {
  /** The inner policy's name, so metrics and labels are unchanged. */
  readonly name: PolicyName;
  /** The inner policy's needs. */
  readonly needs: Policy["needs"];
  readonly #inner: Policy;
  readonly #deps: PolicyDeps;
  readonly #observer: PolicyObserver;
  readonly #mode: AssignmentMode;
  readonly #map: StickyMap;

  /** Wraps `inner`; reads `config.manual` (assignment mode default `delegate`) and the interval. */
  constructor(inner: Policy, deps: PolicyDeps) {
    this.name = inner.name;
    this.needs = inner.needs;
    this.#inner = inner;
    this.#deps = deps;
    this.#observer = deps.observer ?? NO_OBSERVER;
    this.#mode = deps.config.manual.assignmentMode ?? "delegate";
    this.#map = sharedStickyMap(deps, "sticky", this, {
      maxIdleSecs: deps.config.manual.maxIdleSecs,
      evictionIntervalSecs: deps.config.evictionIntervalSecs,
    });
  }

  /** The wrapped policy. */
  get inner(): Policy {
    return this.#inner;
  }

  /** Keys currently pinned (expired ones not yet swept included). */
  get size(): number {
    return this.#map.size;
  }

  select<W extends WorkerView>(
    candidates: readonly W[],
    request: RouteRequest,
    note?: SelectionNote,
  ): W | null {
    const key = request.stickyKey;
    if (key === null) return this.#inner.select(candidates, request, note);
    const now = this.#deps.now();
    this.#swept(this.#map.sweepIfDue(now));
    this.#observer.keySource(request.ridKey !== null ? "rid" : "header");
    if (candidates.length === 0) {
      this.#decide("no_healthy_workers");
      return null;
    }
    const mapKey = stickyMapKey(request.model, key);
    const pin = this.#map.peek(mapKey, candidates, now);
    let pick: W | null;
    if (pin.kind === "pinned") {
      const pinned = pin.worker;
      if (pinned.keyInFlight(key) < STICKY_INFLIGHT_CAP) {
        this.#decide("occupied_hit");
        this.#observer.stickyEntries(this.#map.size);
        return pinned;
      }
      pick = this.#place(candidates, request, note) ?? pinned;
      if (pick !== pinned && pick.keyInFlight(key) < STICKY_INFLIGHT_CAP) {
        this.#map.pinFront(mapKey, pick, now);
      }
      this.#decide("cap_respill");
    } else {
      pick = this.#place(candidates, request, note);
      if (pick !== null) {
        if (this.#mode === "delegate") this.#map.pinFront(mapKey, pick, now);
        else this.#map.push(mapKey, pick, now);
      }
      this.#decide(pin.kind === "stale" ? "occupied_miss" : "vacant");
    }
    this.#observer.stickyEntries(this.#map.size);
    return pick;
  }

  /** Forgets keys idle for `--max-idle-secs` at `now`; returns how many. */
  sweep(now: number): number {
    const n = this.#map.sweep(now);
    this.#swept(n);
    return n;
  }

  /** Tells the inner policy, and drops the worker from every pin. */
  onWorkerRemoved(workerId: string): void {
    this.#inner.onWorkerRemoved?.(workerId);
    this.#map.forgetWorker(workerId);
  }

  /** A new worker for a key: the inner policy in delegate mode, else the assignment mode. */
  #place<W extends WorkerView>(
    candidates: readonly W[],
    request: RouteRequest,
    note?: SelectionNote,
  ): W | null {
    if (this.#mode === "delegate") return this.#inner.select(candidates, request, note);
    return assignWorker(this.#mode, candidates, this.#deps.random);
  }

  #swept(n: number): void {
    if (n === 0) return;
    this.#deps.log.info("sticky sessions: idle keys evicted", {
      evicted: n,
      remaining: this.#map.size,
    });
    this.#observer.stickyEntries(this.#map.size);
  }

  #decide(branch: StickyBranch): void {
    this.#observer.decision("sticky", branch);
  }
}
