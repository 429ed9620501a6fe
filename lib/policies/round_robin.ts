/**
 * `round_robin`: a separate rotation for each set of candidate workers (each model, each pool),
 * so every worker in a set gets an even share, as the seed describes. Upstream keeps one counter
 * per policy instance, so models sharing the default policy skew each other's rotation.
 *
 * Sets are keyed by their worker ids in order; at most `MAX_SETS` rotations are kept (the
 * oldest is dropped first), which bounds memory under worker churn.
 */

import type { RouteRequest, WorkerView } from "../core/types.ts";
import { NEEDS_NOTHING, type Policy } from "./policy.ts";

const MAX_SETS = 1024;

/** Rotates through each candidate set in order. */
export class RoundRobinPolicy implements Policy {
  readonly name = "round_robin";
  readonly needs = NEEDS_NOTHING;
  readonly #next = new Map<string, number>();

  select<W extends WorkerView>(candidates: readonly W[], _r: RouteRequest): W | null {
    const n = candidates.length;
    if (n === 0) return null;
    if (n === 1) return candidates[0];
    let key = candidates[0].id;
    for (let i = 1; i < n; i++) key += "," + candidates[i].id;
    const i = this.#next.get(key) ?? 0;
    if (i === 0 && !this.#next.has(key) && this.#next.size >= MAX_SETS) {
      this.#next.delete(this.#next.keys().next().value!);
    }
    this.#next.set(key, (i + 1) % n);
    return candidates[i % n];
  }

  onWorkerRemoved(workerId: string): void {
    for (const key of this.#next.keys()) {
      if (key.split(",").includes(workerId)) this.#next.delete(key);
    }
  }
}
