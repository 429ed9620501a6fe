/**
 * A simulated engine on a virtual clock, for tests: sleeping advances the clock at once, so a
 * run of any simulated length takes no real time and no timer. Also prompt ids and a runner
 * that records each token with the virtual time it arrived.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../lib/core/clock.ts";
import { SimEngine } from "../lib/sim/engine.ts";
import { DEFAULT_ENGINE } from "../lib/sim/cli.ts";
import type { EngineConfig, GenerateResult } from "../lib/sim/types.ts";

/** The `smg sim-worker` defaults, at time scale 1. */
export const DEFAULTS: EngineConfig = DEFAULT_ENGINE;

/** An engine on a virtual clock that only sleeping advances; `sleeps` records each sleep. */
export function virtualEngine(cfg: Partial<EngineConfig> = {}, seed = 1) {
  const clock = { t: 0, sleeps: [] as number[] };
  const engine = new SimEngine({ ...DEFAULTS, ...cfg }, {
    now: () => clock.t,
    sleep: (ms) => {
      clock.sleeps.push(ms);
      clock.t += ms;
      return Promise.resolve();
    },
    random: seededRandom(seed),
  });
  return { engine, clock };
}

/** `n` prompt token ids unique to `salt`. */
export function prompt(salt: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => (salt * 7919 + i * 31) % 100_000);
}

/** What a run saw: the result, the token ids and the virtual time of each. */
export interface Run {
  result: GenerateResult;
  ids: number[];
  at: number[];
}

/** Submits and records tokens with their virtual times; `onToken` runs after recording. */
export async function run(
  sim: ReturnType<typeof virtualEngine>,
  tokens: number[],
  maxNewTokens: number,
  opts: { signal?: AbortSignal; onToken?: (index: number) => void } = {},
): Promise<Run> {
  const ids: number[] = [];
  const at: number[] = [];
  const result = await sim.engine.submit({ tokens, maxNewTokens, signal: opts.signal }, (id, i) => {
    ids.push(id);
    at.push(sim.clock.t);
    opts.onToken?.(i);
  });
  return { result, ids, at };
}

/** Asserts `actual` is within `eps` of `expected`. */
export const near = (actual: number, expected: number, eps = 1e-6) =>
  assert.ok(Math.abs(actual - expected) <= eps, `${actual} is not ${expected} ± ${eps}`);

/** A simulated worker's server options with no fault on (`model` and `maxNewTokens` aside). */
export const NO_FAULTS = {
  errorRate: 0,
  spikeRate: 0,
  spikeMs: 0,
  dieAfter: 0,
  hang: false,
  role: "regular",
  bootstrapTimeoutMs: 1000,
} as const;
