/**
 * `bench:virtual`'s command line: flags in, `VirtualOptions` out, or a `UsageError` naming the
 * bad flag. The defaults are `bench:routing`'s for a trace replay (scenario, speed, warm-up,
 * window, drain), so that a cell is named the same way in both.
 */

import { DEFAULT_TRACE_WARMUP } from "../options.ts";
import { TRACE_SCENARIOS } from "../scenarios.ts";

/** The generated conversation trace (`conversation_trace.ts`, default config) as `--trace`. */
export const CONVERSATION = "conversation";

/** Targets measured without `--targets`. */
export const DEFAULT_TARGETS = ["ref:affinity", "round_robin", "cache_aware"];

/** A trace scenario name. */
export type TraceScenario = keyof typeof TRACE_SCENARIOS;

/** What one run replays and measures. */
export interface VirtualOptions {
  /** A Mooncake-format trace file, or `conversation` (`--trace`, default conversation). */
  trace: string;
  /** Fleet defaults (`--scenario`, default trace). */
  scenario: TraceScenario;
  /** Workers per fleet (`--workers`, the scenario's 8). */
  workers: number;
  /** Timestamps are divided by this (`--speed`, the scenario's 2.5). */
  speed: number;
  /** Requests sent unmeasured first (`--trace-warmup`, 400). */
  warmup: number;
  /** Seconds the window lasts at most (`--duration`, 10; Infinity with `--requests` alone). */
  duration: number;
  /** Measured requests at most (`--requests`), or null. */
  requests: number | null;
  /** Virtual seconds to wait for requests in flight after the window (`--drain`, 15). */
  drain: number;
  /** Seed of block texts, workers and gateway (`--seed`, 0). */
  seed: number;
  /** The workers' `--chars-per-token`, which the prompts are sized for (default null: theirs). */
  charsPerToken: number | null;
  /** sim-worker flags after `SIM_KNOBS` and the scenario's (`--sim`, `--time-scale`). */
  simArgs: string[];
  /** Target entries (`--targets` list and `--target` entries, in order). */
  targets: string[];
  /** Each arrival late by up to this many ms, seeded (`--jitter-ms`, default 0). */
  jitterMs: number;
  /** Replays per target, jitter seeds 1 … N (`--repeats`, default 1; needs `--jitter-ms`). */
  repeats: number;
  /** Virtual ms between a pick and its engine submit (`--overhead-ms`, default 0). */
  overheadMs: number;
  /** ms between a meshed router's tree-sync rounds (`--mesh-round-ms`, default 1000). */
  meshRoundMs: number;
  /** ms between a meshed router's load reports (`--mesh-load-ms`; null, `off`: none). */
  meshLoadMs: number | null;
  /** Fire timers due at one instant in one round (`--together`, default false: one a round). */
  together: boolean;
  /** Where to write the results as JSON (`--json`), or null. */
  json: string | null;
}

/** A bad command line; its message names the flag. */
export class UsageError extends Error {}

/** The `--help` text. */
export const USAGE = `usage: deno task bench:virtual [options]
  Replays a trace through real policies in front of in-process simulated engines on a virtual
  clock: bench:routing's trace cells in seconds instead of minutes.
  --trace FILE|conversation  a Mooncake-format trace, or the generated conversation trace
                     (bench/routing/conversation_trace.ts, default config) (default conversation)
  --scenario NAME    ${
  Object.entries(TRACE_SCENARIOS).map(([k, v]) => `${k} (${v.about})`).join("; ")
} (default trace)
  --workers N        workers per fleet (default: the scenario's)
  --speed X          timestamps ÷ X (default 2.5)
  --trace-warmup N   requests sent unmeasured first (default ${DEFAULT_TRACE_WARMUP})
  --duration S       seconds of the measured window, from request N's arrival (default 10)
  --requests N       measured requests at most (alone: the window is N requests)
  --drain S          virtual seconds to wait for requests in flight after it (default 15)
  --chars-per-token N  the workers tokenize at N characters per token; prompts sized for it
  --seed N           seed of the block texts, the workers and the gateway (default 0)
  --sim "FLAGS"      extra sim-worker flags after the defaults (e.g. "--kv-tokens 65536")
  --time-scale X     the workers' --time-scale (default 2, as bench:routing's fleet)
  --targets LIST     comma list of targets (default ${DEFAULT_TARGETS.join(",")}); a target is
                     ref:affinity, or [smg:]POLICY[/VARIANT][:GATEWAY FLAGS], e.g. cache_aware,
                     smg:cache_aware/smg, "cache_aware:--cache-aware-scoring smg --wait-model smg";
                     a last #N is N routers behind a round-robin front, #N-mesh on a mesh
  --target ENTRY     one more target (its flags may hold commas)
  --mesh-round-ms X  ms between a meshed router's tree-sync rounds (default 1000, as the mesh's)
  --mesh-load-ms X   ms between a meshed router's load reports to the others, or off (default off)
  --overhead-ms X    virtual ms from a pick to its engine submit, standing for what the real
                     path spends there (HTTP hops, the worker parsing and tokenizing; default 0)
  --jitter-ms X      each arrival late by a seeded uniform draw in [0, X) ms: the timing noise of
                     a real run (default 0: exact trace times)
  --repeats N        replay each target N times, jitter seeds 1..N (needs --jitter-ms)
  --together         fire the timers due at one instant in one round (default: one a round)
  --json PATH        also write the results as JSON`;

function number(flag: string, v: string | undefined, min: number, max: number, int = true): number {
  const n = Number(v);
  if (
    v === undefined || v.trim() === "" || !(n >= min && n <= max) || (int && !Number.isInteger(n))
  ) {
    throw new UsageError(
      `${flag} needs ${int ? "an integer" : "a number"} in ${min}..${max}, got ${v}`,
    );
  }
  return n;
}

/** Parses `args`; returns "help" for `--help`, throws `UsageError` on a bad flag. */
export function parseVirtualOptions(args: readonly string[]): VirtualOptions | "help" {
  const o: VirtualOptions = {
    trace: CONVERSATION,
    scenario: "trace",
    workers: NaN,
    speed: NaN,
    warmup: DEFAULT_TRACE_WARMUP,
    duration: NaN,
    requests: null,
    drain: 15,
    seed: 0,
    charsPerToken: null,
    simArgs: [],
    targets: [],
    together: false,
    overheadMs: 0,
    meshRoundMs: 1000,
    meshLoadMs: null,
    jitterMs: 0,
    repeats: 1,
    json: null,
  };
  const extraSim: string[] = [];
  let listed: string[] | null = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.startsWith("--") && a.includes("=")
      ? a.split(/=(.*)/s, 2)
      : [a, undefined];
    const value = () => {
      const v = inline ?? args[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--":
        break;
      case "--trace":
        o.trace = value();
        break;
      case "--scenario": {
        const v = value();
        if (!(v in TRACE_SCENARIOS)) {
          throw new UsageError(`--scenario is one of ${Object.keys(TRACE_SCENARIOS).join(", ")}`);
        }
        o.scenario = v as TraceScenario;
        break;
      }
      case "--workers":
        o.workers = number(flag, value(), 1, 64);
        break;
      case "--speed":
        o.speed = number(flag, value(), 0.01, 1000, false);
        break;
      case "--trace-warmup":
        o.warmup = number(flag, value(), 0, 10_000_000);
        break;
      case "--duration":
        o.duration = number(flag, value(), 0.001, 86_400, false);
        break;
      case "--requests":
      case "--max-requests":
        o.requests = number(flag, value(), 1, 10_000_000);
        break;
      case "--drain":
        o.drain = number(flag, value(), 0, 86_400, false);
        break;
      case "--seed":
        o.seed = number(flag, value(), 0, 2 ** 31 - 1);
        break;
      case "--chars-per-token":
        o.charsPerToken = number(flag, value(), 1, 1024, false);
        break;
      case "--sim":
        extraSim.push(...value().split(/\s+/).filter(Boolean));
        break;
      case "--time-scale":
        extraSim.push("--time-scale", String(number(flag, value(), 0, 1000, false)));
        break;
      case "--targets":
        listed = value().split(",").map((x) => x.trim()).filter(Boolean);
        break;
      case "--target":
        o.targets.push(value().trim());
        break;
      case "--overhead-ms":
        o.overheadMs = number(flag, value(), 0, 60_000, false);
        break;
      case "--jitter-ms":
        o.jitterMs = number(flag, value(), 0, 60_000, false);
        break;
      case "--mesh-round-ms":
        o.meshRoundMs = number(flag, value(), 1, 60_000, false);
        break;
      case "--mesh-load-ms": {
        const v = value();
        o.meshLoadMs = v === "off" ? null : number(flag, v, 1, 60_000, false);
        break;
      }
      case "--repeats":
        o.repeats = number(flag, value(), 1, 1000);
        break;
      case "--together":
        o.together = true;
        break;
      case "--json":
        o.json = value();
        break;
      case "-h":
      case "--help":
        return "help";
      default:
        throw new UsageError(`unknown argument ${a}`);
    }
  }
  if (extraSim.some((a) => a.split("=")[0] === "--chars-per-token")) {
    throw new UsageError(
      "give --chars-per-token N, not in --sim, so that the prompts are sized for it",
    );
  }
  if (o.repeats > 1 && o.jitterMs === 0) {
    throw new UsageError("--repeats needs --jitter-ms: without jitter every repeat is the same");
  }
  const sc = TRACE_SCENARIOS[o.scenario];
  if (Number.isNaN(o.workers)) o.workers = sc.workers;
  if (Number.isNaN(o.speed)) o.speed = sc.speeds[0];
  if (Number.isNaN(o.duration)) o.duration = o.requests !== null ? Infinity : 10;
  o.simArgs = [...sc.simArgs, ...extraSim];
  if (o.charsPerToken !== null) o.simArgs.push("--chars-per-token", String(o.charsPerToken));
  o.targets = [...(listed ?? (o.targets.length ? [] : DEFAULT_TARGETS)), ...o.targets];
  return o;
}
