/**
 * `consistent_hashing`: a request's key picks its worker on a hash ring (150 virtual nodes per
 * worker URL, `hash_ring.ts`), so the same key lands on the same worker and adding or removing
 * one of n workers moves about 1/n of the keys. The ring holds every worker the policy has seen;
 * a lookup accepts only this request's candidates, so an unavailable worker's keys go to the
 * next candidate clockwise and return when it recovers.
 *
 * Key priority (where it differs from SMG's, the step says so):
 * 1. `X-SMG-Target-Worker`: a worker URL, worker id, or 0-based index into the candidate list.
 *    Unknown or not a candidate → 503 `target_worker_unavailable`, never silently rerouted.
 *    An empty value counts as absent. Indices shift as workers become unavailable (SMG
 *    does the same); URL or id is the stable way to name a worker.
 * 2. `request.ridKey` (the body `rid`, only with `--routing-key-override`; SMG never reads
 *    it here). Reported as branch `rid_hit` so operators can tell it from header keys.
 * 3. `request.routingKey` (first valid `--routing-key-headers` value, ≤ 128 bytes). SMG
 *    also falls back to a raw `x-smg-routing-key` when the configured list excludes it; we use
 *    the configured list only, as every other consumer of the routing key does.
 * 4. Implicit key: Authorization, X-Forwarded-For, Cookie, the first PRESENT one with a valid
 *    (non-empty, visible ASCII) value. SMG goes to random when the first present one is
 *    invalid; we try the next, because an empty `Authorization:` sent by a
 *    client library says nothing about the session while its X-Forwarded-For still does.
 * 5. Uniform random over the candidates (`deps.random`).
 *
 * Branches reported to the observer: no_healthy_workers, target_worker_hit, target_worker_miss,
 * rid_hit, routing_key_hit (header and implicit keys, as in SMG), random_fallback.
 */

import { randomIndex } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import { CandidateRing, hash53 } from "./hash_ring.ts";
import { NEEDS_NOTHING, type Policy } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/** The header naming an explicit target worker. */
export const TARGET_WORKER_HEADER = "x-smg-target-worker";

/** Headers that identify a client session when no routing key is given, in priority order. */
export const IMPLICIT_KEY_HEADERS = ["authorization", "x-forwarded-for", "cookie"] as const;

/** Visible ASCII plus space and tab, as Rust's `HeaderValue::to_str` accepts. */
const VISIBLE_ASCII = /^[\t\x20-\x7e]+$/;

/** Longest target value quoted back in an error message. */
const MAX_QUOTED = 256;

/** Hash-ring routing on target worker, rid, routing key or an implicit session header. */
export class ConsistentHashingPolicy implements Policy {
  readonly name = "consistent_hashing";
  readonly needs = NEEDS_NOTHING;
  readonly #deps: PolicyDeps;
  readonly #ring = new CandidateRing();

  /** Draws the keyless fallback from `deps.random`; reports branches to `deps.observer`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    if (candidates.length === 0) return this.#branch("no_healthy_workers", null);
    const target = request.headers.get(TARGET_WORKER_HEADER);
    if (target) return this.#branch("target_worker_hit", this.#target(candidates, target));
    const [key, branch] = sessionKey(request);
    if (key !== null) {
      this.#ring.mark(candidates);
      const owner = this.#ring.owner<W>(hash53(key));
      if (owner) return this.#branch(branch, owner);
    }
    return this.#branch(
      "random_fallback",
      candidates[randomIndex(this.#deps.random, candidates.length)],
    );
  }

  onWorkerRemoved(workerId: string): void {
    this.#ring.remove(workerId);
  }

  /** The candidate named by `value` (URL, id or index); throws 503 when there is none. */
  #target<W extends WorkerView>(candidates: readonly W[], value: string): W {
    const url = value.replace(/\/+$/, "");
    for (const c of candidates) {
      if (c.id === value || c.url === value || c.url.replace(/\/+$/, "") === url) return c;
    }
    if (/^[0-9]{1,9}$/.test(value)) {
      const i = Number(value);
      if (i < candidates.length) return candidates[i];
    }
    this.#deps.observer?.decision(this.name, "target_worker_miss");
    const quoted = value.length > MAX_QUOTED ? `${value.slice(0, MAX_QUOTED)}…` : value;
    throw new GatewayError(
      503,
      "target_worker_unavailable",
      `X-SMG-Target-Worker '${quoted}' is not an available worker`,
      { retryAfter: 1 },
    );
  }

  #branch<T>(branch: string, pick: T): T {
    this.#deps.observer?.decision(this.name, branch);
    return pick;
  }
}

/** The ring key for `request` and the branch it reports, or `[null, ""]` when it has none. */
export function sessionKey(request: RouteRequest): [string | null, string] {
  if (request.ridKey) return [request.ridKey, "rid_hit"];
  if (request.routingKey) return [request.routingKey, "routing_key_hit"];
  for (const name of IMPLICIT_KEY_HEADERS) {
    const v = request.headers.get(name);
    if (v !== null && VISIBLE_ASCII.test(v)) return [v, "routing_key_hit"];
  }
  return [null, ""];
}
