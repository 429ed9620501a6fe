/**
 * Fixtures for policy tests: plain `WorkerView` candidates, a `RouteRequest`, and policy
 * dependencies with a seeded random source and a logger whose lines are kept.
 */

import { type Random, seededRandom } from "../lib/core/clock.ts";
import { createLogger } from "../lib/core/log.ts";
import type { LoadSnapshot, RouteRequest, WorkerView } from "../lib/core/types.ts";
import type { PolicyDeps } from "../lib/policies/policy_deps.ts";
import { defaultConfig } from "../lib/config/config.ts";
import { DEFAULT_CHARS_PER_TOKEN } from "../lib/core/chars_per_token.ts";

const seqs = new Map<string, number>();

/** A candidate with id `id` (same id, same `seq`), idle and without a load report unless given. */
export function view(id: string, extra: Partial<WorkerView> = {}): WorkerView {
  let seq = seqs.get(id);
  if (seq === undefined) seqs.set(id, seq = seqs.size + 1);
  return {
    id,
    seq,
    url: `http://${id}:8000`,
    inFlight: 0,
    prefillTokens: 0,
    load: null,
    loadAt: 0,
    keyInFlight: () => 0,
    activeKeys: 0,
    type: "regular",
    ...extra,
  };
}

/** `n` candidates named w0..w(n-1). */
export function views(n: number, prefix = "w"): WorkerView[] {
  return Array.from({ length: n }, (_, i) => view(`${prefix}${i}`));
}

/** A minimal load report. */
export function load(over: Partial<LoadSnapshot> = {}): LoadSnapshot {
  return {
    runningRequests: 0,
    waitingRequests: 0,
    waitingUncachedTokens: null,
    usedTokens: null,
    maxTokens: null,
    tokenUsage: 0,
    genThroughput: null,
    cacheHitRate: null,
    source: "loads",
    details: null,
    ...over,
  };
}

/** A chat request for `model` routing on `text`. */
export function request(text = "hello", over: Partial<RouteRequest> = {}): RouteRequest {
  return {
    endpoint: "chat",
    model: "m",
    stream: false,
    text,
    tokens: null,
    charsPerToken: DEFAULT_CHARS_PER_TOKEN,
    headers: new Headers(),
    routingKey: null,
    rid: null,
    ridKey: null,
    stickyKey: null,
    ...over,
  };
}

/**
 * Policy dependencies with `random` seeded from `seed`; `lines` collects the log output. The
 * config keeps SMG's scoring (`--wait-model smg`, `--cache-aware-scoring smg`), which most policy
 * tests check against upstream's numbers; `ours` gives the defaults.
 */
export function deps(seed = 1, random?: Random, ours = false): PolicyDeps & { lines: string[] } {
  const lines: string[] = [];
  const config = defaultConfig();
  if (!ours) {
    config.leastLoad.waitModel = "smg";
    config.cacheAware.scoring = "smg";
  }
  return {
    random: random ?? seededRandom(seed),
    now: () => 0,
    log: createLogger({ level: "debug", json: true, sink: (l) => lines.push(l) }),
    config,
    lines,
  };
}

/** How many times each id was picked. */
export function tally(picks: readonly (WorkerView | null)[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of picks) {
    const k = p?.id ?? "null";
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}
