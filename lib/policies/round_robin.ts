/**
 * `round_robin`: a separate rotation for each set of candidate workers (each model, each pool),
 * so every worker in a set gets an even share. SMG keeps one counter
 * per policy instance, so models sharing the default policy skew each other's rotation.
 *
 * Sets are keyed by a hash of their workers' sequence numbers in order (O(n) integer work, no
 * string building); at most `MAX_SETS` rotations are kept (the oldest is dropped first), which
 * bounds memory under worker churn; sets that include a removed worker simply age out.
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
    const key = setKey(candidates);
    const i = this.#next.get(key) ?? 0;
    if (i === 0 && !this.#next.has(key) && this.#next.size >= MAX_SETS) {
      this.#next.delete(this.#next.keys().next().value!);
    }
    this.#next.set(key, (i + 1) % n);
    return candidates[i % n];
  }
}

/** Identity of a candidate list: its length and two 32-bit hashes of its worker sequence numbers. */
function setKey(candidates: readonly WorkerView[]): string {
  let h1 = 0x811c9dc5;
  let h2 = 17;
  for (const w of candidates) {
    h1 = Math.imul(h1 ^ w.seq, 0x01000193);
    h2 = Math.imul(h2, 31) + w.seq | 0;
  }
  return `${candidates.length}:${h1 >>> 0}:${h2 >>> 0}`;
}
