/**
 * `manual`: pins each routing key to a worker and keeps it there until the worker is not among
 * the candidates (unavailable) or the key is idle for `--max-idle-secs`. In: the candidates and
 * the request's key; out: the pinned worker, or a new one placed by `--assignment-mode`
 * (`random` by default; `min_load`, `min_group`; `delegate` acts as min_load here). Keyless
 * requests are placed the same way and not pinned.
 *
 * The key is the request's sticky key: the body `rid` key with `--routing-key-override`, else
 * the routing-key header (configured list, ≤ 128 bytes; turn suffixes stripped under the
 * override, as sticky sessions do). SMG reads only the raw `x-smg-routing-key` header here
 * (no length cap, ignoring `--routing-key-headers`), unlike every other key reader; we use the
 * one key everyone else uses. Keys are scoped by model (SMG's map is not, see StickyMap).
 *
 * Failover follows SMG: a pinned worker that becomes unavailable gets a second worker
 * appended (`occupied_miss`); while the first is back it is the primary again; after two
 * failovers it is forgotten. Idle keys are swept lazily from `select`, at most once per
 * `--eviction-interval` (no timer); `sweep(now)` is exposed for callers that want it sooner.
 * Known gap: PD legs are not namespaced yet (no leg on RouteRequest).
 */

import type { AssignmentMode } from "../config/config.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import { assignWorker } from "./assignment.ts";
import { NEEDS_NOTHING, NO_OBSERVER, type Policy, type PolicyObserver } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";
import { sharedStickyMap, type StickyMap, stickyMapKey } from "./sticky_map.ts";

/** Decision branches of `manual` (SMG's `smg_manual_policy_branch_total` labels). */
export type ManualBranch =
  | "no_healthy_workers"
  | "occupied_hit"
  | "occupied_miss"
  | "vacant"
  | "no_routing_id";

/** The routing key `manual` pins on, or null: the sticky key, else the routing-key header. */
export function manualKey(request: RouteRequest): string | null {
  return request.stickyKey ?? request.routingKey;
}

/** Routing key → worker pins with idle expiry. */
export class ManualPolicy implements Policy {
  readonly name = "manual";
  readonly needs = NEEDS_NOTHING;
  readonly #deps: PolicyDeps;
  readonly #observer: PolicyObserver;
  readonly #mode: AssignmentMode;
  readonly #map: StickyMap;

  /** Reads `config.manual` and `config.evictionIntervalSecs`; draws from `deps.random`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
    this.#observer = deps.observer ?? NO_OBSERVER;
    this.#mode = deps.config.manual.assignmentMode ?? "random";
    this.#map = sharedStickyMap(deps, "manual", this, {
      maxIdleSecs: deps.config.manual.maxIdleSecs,
      evictionIntervalSecs: deps.config.evictionIntervalSecs,
    });
  }

  /** Keys currently pinned (expired ones not yet swept included). */
  get size(): number {
    return this.#map.size;
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    const now = this.#deps.now();
    this.#sweepIfDue(now);
    if (candidates.length === 0) {
      this.#decide("no_healthy_workers");
      return null;
    }
    const key = manualKey(request);
    if (key === null) {
      this.#decide("no_routing_id");
      return assignWorker(this.#mode, candidates, this.#deps.random);
    }
    const mapKey = stickyMapKey(request.model, key);
    const pin = this.#map.peek(mapKey, candidates, now);
    let pick: W;
    if (pin.kind === "pinned") {
      pick = pin.worker;
      this.#decide("occupied_hit");
    } else {
      pick = assignWorker(this.#mode, candidates, this.#deps.random);
      this.#map.push(mapKey, pick, now);
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

  /** Drops the departed worker from every pin. */
  onWorkerRemoved(workerId: string): void {
    this.#map.forgetWorker(workerId);
  }

  #sweepIfDue(now: number): void {
    this.#swept(this.#map.sweepIfDue(now));
  }

  #swept(n: number): void {
    if (n === 0) return;
    this.#deps.log.info("manual: idle routing keys evicted", {
      evicted: n,
      remaining: this.#map.size,
    });
    this.#observer.stickyEntries(this.#map.size);
  }

  #decide(branch: ManualBranch): void {
    this.#observer.decision("manual", branch);
  }
}
