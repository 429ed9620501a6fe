/**
 * The routing benchmark's scenarios: the fleet's default simulator knobs, and the named sets of
 * defaults `--scenario` picks (fleet size, workload shape, load points) for the synthetic workload
 * and for a trace replay.
 */

/**
 * The fleet's simulator knobs: the engine defaults, a 32k-token KV cache, at half speed. The
 * workload's 24 tenant prompts (~48k tokens) do not fit one worker's cache but fit the fleet's,
 * so where a conversation lands decides what is cached. `--time-scale 2` halves the request rate
 * that saturates the fleet (to ~12 req/s for round robin), which keeps the client, target and
 * workers on this 2-core machine well below a core each, and the simulated latencies (tens to
 * thousands of ms) far above the few ms of CPU each process spends per request.
 */
export const SIM_KNOBS = [
  "--kv-tokens",
  "32768",
  "--block-size",
  "16",
  "--max-running",
  "32",
  "--prefill-chunk",
  "2048",
  "--prefill-tps",
  "8000",
  "--decode-base-ms",
  "6",
  "--decode-per-req-ms",
  "0.35",
  "--time-scale",
  "2",
  "--max-new-tokens",
  "64",
];

/** Default open-loop rates (req/s): light, and near the 4-worker fleet's saturation. */
export const DEFAULT_RATES = [5, 14];

/** A scenario: the defaults of fleet size, workload and load points. */
export interface ScenarioDefaults {
  /** What it is, for `--help` and the report. */
  about: string;
  workers: number;
  tenants: number;
  tenantSkew: number;
  /** System prompt length range in tokens. */
  systemTokens: [number, number];
  /** sim-worker flags after `SIM_KNOBS`. */
  simArgs: string[];
  /** Open-loop rates (req/s), lightest first; the last near saturation. */
  rates: number[];
}

/**
 * The scenarios. `standard`: 4 workers, 24 Zipf-popular tenants whose prompts fit the fleet's
 * caches but not one worker's. `small-kv`: as many tenants as workers (8, alike: equally popular,
 * system prompts of similar length, so that pinning each to a worker is balanced), each
 * worker's KV cache holding only a few tenants' system prompts (16k tokens), so that affinity
 * and balance pull against each other. Its rates offer round robin's uncached prompt tokens at
 * about 40, 60 and 80 % of the fleet's prefill capacity (8 × 4,000 tokens/s wall at
 * `--time-scale 2`, ~2,200-token prompts, ~76 % of them cached under round robin).
 */
export const SCENARIOS = {
  standard: {
    about: "4 workers, 24 Zipf(1) tenants, 32k-token KV caches",
    workers: 4,
    tenants: 24,
    tenantSkew: 1,
    systemTokens: [1000, 3000],
    simArgs: [],
    rates: DEFAULT_RATES,
  },
  "small-kv": {
    about:
      "8 workers, 8 alike tenants (equally popular, 1,800-2,200-token system prompts), 16k-token KV caches (a few system prompts each)",
    workers: 8,
    tenants: 8,
    tenantSkew: 0,
    systemTokens: [1800, 2200],
    simArgs: ["--kv-tokens", "16384"],
    rates: [24, 36, 48],
  },
} satisfies Record<string, ScenarioDefaults>;

/** A trace scenario: the defaults of fleet size and replay speeds, for `--trace`. */
export interface TraceScenarioDefaults {
  /** What it is, for `--help` and the report. */
  about: string;
  workers: number;
  /** sim-worker flags after `SIM_KNOBS`. */
  simArgs: string[];
  /** Replay speeds, lightest first. */
  speeds: number[];
}

/**
 * The fleet's prefill speed in the trace scenarios: 48,000 simulated tokens/s (24,000 wall at
 * `--time-scale 2`), so that 8 workers take the Mooncake synthetic trace at 2.5× (about 110k
 * prompt tokens/s in its first minutes, nearly all uncached under round robin) at about 55 % of
 * their prefill capacity.
 */
const TRACE_FLEET = ["--prefill-tps", "48000"];

/**
 * The trace scenarios. `trace`: 8 workers with 2M-token KV caches, which hold what a 60-s window
 * of the Mooncake synthetic trace at 2.5× reuses (its reuse spans minutes: two requests sharing a
 * document are often hundreds of seconds apart), so where a request lands decides what is cached.
 * `trace-small-kv`: the same with 256k-token caches, 2M in all, a fifth of the ~10M distinct
 * prompt tokens the trace has sent by the end of such a window (a third of the ~6M the window
 * itself sends): most reuse is evicted before it comes, whatever the routing (an offline LRU
 * count over that window: about 4 % hit, against a bound of 26 %; not measured yet).
 */
export const TRACE_SCENARIOS = {
  trace: {
    about: "8 workers, 2M-token KV caches, prefill 48k tokens/s",
    workers: 8,
    simArgs: ["--kv-tokens", "2097152", ...TRACE_FLEET],
    speeds: [2.5],
  },
  "trace-small-kv": {
    about: "8 workers, 256k-token KV caches, prefill 48k tokens/s",
    workers: 8,
    simArgs: ["--kv-tokens", "262144", ...TRACE_FLEET],
    speeds: [2.5],
  },
} satisfies Record<string, TraceScenarioDefaults>;

/** A scenario name. */
export type Scenario = keyof typeof SCENARIOS | keyof typeof TRACE_SCENARIOS;
