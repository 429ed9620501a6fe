/**
 * Fixtures for the key-pinning policies (manual, sticky sessions): an observer that records
 * decisions, a candidate whose in-flight and per-key counts change as a test holds keys, policy
 * deps with a movable clock, and a scripted inner policy.
 */

import type { PolicyName } from "../../lib/config/config.ts";
import type { RouteRequest, WorkerView } from "../../lib/core/types.ts";
import type { Policy, PolicyObserver } from "../../lib/policies/policy.ts";
import type { PolicyDeps } from "../../lib/policies/policy_deps.ts";
import { deps, request, view } from "../../support/policies.ts";

/** A PolicyObserver that keeps what it was told. */
export interface Recorder extends PolicyObserver {
  /** `policy:branch` per decision, in order. */
  decisions: string[];
  /** Every reported map size. */
  entries: number[];
  /** Every reported key source. */
  sources: ("rid" | "header")[];
}

/** A fresh recorder. */
export function recorder(): Recorder {
  const r: Recorder = {
    decisions: [],
    entries: [],
    sources: [],
    decision: (p, b) => r.decisions.push(`${p}:${b}`),
    stickyEntries: (n) => r.entries.push(n),
    keySource: (s) => r.sources.push(s),
  };
  return r;
}

/** Deps with a recorder and a clock moved by `advance(ms)`; `edit` adjusts the config first. */
export function stickyDeps(
  edit: (c: PolicyDeps["config"]) => void = () => {},
  seed = 1,
): PolicyDeps & { rec: Recorder; advance(ms: number): void; lines: string[] } {
  const d = deps(seed);
  let t = 1_000;
  const rec = recorder();
  edit(d.config);
  return { ...d, now: () => t, observer: rec, rec, advance: (ms) => t += ms };
}

/** A candidate whose counters follow `hold` and `release`; `busy` adds other traffic. */
export interface Tracked {
  /** The candidate. */
  view: WorkerView;
  /** Puts a request carrying `key` (or none) in flight. */
  hold(key?: string | null): void;
  /** Ends one such request. */
  release(key?: string | null): void;
  /** Sets in-flight requests without a key. */
  busy(n: number): void;
}

/** A tracked candidate named `id`. */
export function tracked(id: string): Tracked {
  const keys = new Map<string, number>();
  let other = 0;
  const base = view(id, { keyInFlight: (k) => keys.get(k) ?? 0 });
  const v: WorkerView = Object.defineProperties(base, {
    inFlight: { get: () => other + [...keys.values()].reduce((a, b) => a + b, 0) },
    activeKeys: { get: () => keys.size },
  });
  return {
    view: v,
    hold(key = null) {
      if (key === null) other++;
      else keys.set(key, (keys.get(key) ?? 0) + 1);
    },
    release(key = null) {
      if (key === null) other--;
      else {
        const n = (keys.get(key) ?? 1) - 1;
        if (n <= 0) keys.delete(key);
        else keys.set(key, n);
      }
    },
    busy(n) {
      other = n;
    },
  };
}

/** A request carrying sticky key `key` (header-derived unless `rid`) for `model`. */
export function keyed(key: string | null, over: Partial<RouteRequest> = {}): RouteRequest {
  return request("hello", { routingKey: key, stickyKey: key, ...over });
}

/** An inner policy that picks with `choose` and remembers calls and removals. */
export class ScriptedPolicy implements Policy {
  readonly needs = { requestText: true, backendLoads: false };
  /** Candidate ids per call. */
  readonly calls: string[][] = [];
  /** Ids passed to onWorkerRemoved. */
  readonly removed: string[] = [];
  /** Picks from the candidates; default the last one. */
  choose: (c: readonly WorkerView[]) => WorkerView | null = (c) => c.at(-1) ?? null;
  /** Names itself `name`. */
  constructor(readonly name: PolicyName = "cache_aware") {}

  select<W extends WorkerView>(candidates: readonly W[], _r: RouteRequest): W | null {
    this.calls.push(candidates.map((c) => c.id));
    return this.choose(candidates) as W | null;
  }

  onWorkerRemoved(id: string): void {
    this.removed.push(id);
  }
}
