/**
 * The routing benchmark's command line: flags in, an `Options` out. A bad flag prints the usage
 * and exits 2; `--help` prints it and exits 0. The defaults come from the scenarios
 * (`scenarios.ts`).
 */

import {
  DEFAULT_RATES,
  type Scenario,
  type ScenarioDefaults,
  SCENARIOS,
  TRACE_SCENARIOS,
  type TraceScenarioDefaults,
} from "./scenarios.ts";

/**
 * One load point: open loop at a request rate, closed loop at a concurrency, or a trace replayed
 * at a speed.
 */
export interface LoadPoint {
  /** Row label in the report, e.g. `light (open loop, 3 req/s)`. */
  label: string;
  /** What the client offers. */
  load: { rate: number } | { concurrency: number } | { speed: number };
}

/** A trace to replay instead of the synthetic workload (`--trace`). */
export interface TraceOptions {
  /** The Mooncake-format trace file (JSON lines). */
  path: string;
  /** Requests sent unmeasured before the window opens (`--trace-warmup`, 400). */
  warmup: number;
}

/** What one run measures, from the command line. */
export interface Options {
  /** Simulated workers per fleet. */
  workers: number;
  /** Load points, in order. */
  points: LoadPoint[];
  /** Seconds of the measured window per (target, load point). */
  duration: number;
  /** Seconds of unrecorded warm-up before it (synthetic workload; a trace counts requests). */
  warmup: number;
  /** Seconds to wait for requests in flight after the window. */
  drain: number;
  /** Cap on measured requests per (target, load point), or null. */
  requests: number | null;
  /** The trace replayed instead of the synthetic workload, or null. */
  trace: TraceOptions | null;
  /** `--targets` entries, or null for the default list. */
  targets: string[] | null;
  /** Seed of the workload, the workers and the gateway's randomness. */
  seed: number;
  /** Tenants in the synthetic workload. */
  tenants: number;
  /** Zipf exponent of tenant popularity (0: uniform). */
  tenantSkew: number;
  /** System prompt length range in tokens. */
  systemTokens: [number, number];
  /** The scenario the defaults come from (`--scenario`). */
  scenario: Scenario;
  /** sim-worker flags appended to `SIM_KNOBS`. */
  simArgs: string[];
  /** Where to write the JSON results, or null. */
  json: string | null;
  /**
   * How the gateway talks to the workers (`--connection-mode`): http; grpc (the gateway
   * tokenizes); http-kv (HTTP, the workers publishing KV events over ZeroMQ, the gateway
   * tokenizing to route on them).
   */
  connectionMode: ConnectionMode;
  /**
   * The workers' `--chars-per-token` (added to `simArgs`), which the prompts are sized for; null
   * for their default tokenizer (`--chars-per-token`).
   */
  charsPerToken: number | null;
  /**
   * Where our gateway's `main.ts` is read from (`--gateway-root`, a checkout of another commit),
   * or null for this tree's; the workers, client and references are always this tree's.
   */
  gatewayRoot: string | null;
}

/** How the gateway reaches the workers (`--connection-mode`). */
export type ConnectionMode = "http" | "grpc" | "http-kv";

/** Requests a trace replay sends unmeasured first, by default. */
export const DEFAULT_TRACE_WARMUP = 400;

/** The `--help` text. */
export const USAGE = `usage: deno task bench:routing [options]
       deno task bench:routing --trace FILE [--speed X,Y] [options]
  --scenario NAME    defaults of the flags below: ${
  Object.entries(SCENARIOS).map(([k, v]) => `${k} (${v.about})`).join("; ")
} (default standard); with --trace: ${
  Object.entries(TRACE_SCENARIOS).map(([k, v]) => `${k} (${v.about})`).join("; ")
} (default trace)
  --workers N        simulated workers per fleet (default 4; 8 with --trace)
  --rate A,B         open-loop load points in requests/s (default ${
  DEFAULT_RATES.join(",")
}; small-kv ${SCENARIOS["small-kv"].rates.join(",")})
  --concurrency A,B  closed-loop load points in concurrent users (added after any --rate points)
  --duration S       seconds of the measured window per target and point (default 10; 5 with --quick)
  --warmup S         seconds of unrecorded warm-up before it (default 4; 2 with --quick)
  --drain S          seconds to wait for requests in flight afterwards (default 15)
  --requests N       also stop a window after N measured requests (alias --max-requests)
  --targets LIST     comma list of ref:upper-bound, ref:oracle, ref:affinity, smg:<policy>,
                     haproxy:<variant>, nginx:<variant>, or the kinds ref, smg, haproxy, nginx, or
                     all (default: all; policies this build lacks and targets without meaning for
                     the workload are skipped with a note); smg:<policy>@--flag=value[@...] is that
                     policy with gateway flags of its own; a smg: target ending in #N is N routers
                     behind an HAProxy round-robin front, #N-mesh the same on a mesh (HTTP workers)
  --tenants N        tenants with their own system prompt (default 24)
  --tenant-skew X    Zipf exponent of tenant popularity, 0 uniform (default 1)
  --seed N           seed of the workload (or the trace's block texts), workers and gateway
                     (default 0)
  --sim "FLAGS"      extra sim-worker flags, after the defaults (e.g. "--kv-tokens 65536")
  --chars-per-token N
                     every simulated worker (fleet and references) tokenizes at a mean of N
                     characters per token (its --chars-per-token), and the prompts are sized in
                     those tokens, so the token load is the same at any N (default: the workers'
                     word chunks, ~2.3 characters per token on this text; HTTP only)
  --quick            short windows, for a smoke test
  --json PATH        also write the results as JSON
  --gateway-root DIR run our gateway's main.ts from DIR (a checkout of another commit; the
                     workers, client and references stay this tree's): how bench:guard compares
                     commits
  --connection-mode grpc
                     the workers also serve sglang's scheduler gRPC service and our gateway
                     reaches them over it, tokenizing with Qwen3's tokenizer (HAProxy and nginx
                     targets are skipped; ref:upper-bound stays HTTP)
  --connection-mode http-kv
                     HTTP, and the workers publish their KV events over ZeroMQ (tokenizing with
                     Qwen3, as our gateway does), labelled kv_events for our gateway, which
                     tokenizes with Qwen3 and routes cache_aware on the events
Trace replay, instead of the synthetic workload (no --rate, --concurrency, --warmup, --tenants,
--tenant-skew):
  --trace FILE       a Mooncake-format trace (JSON lines of timestamp ms, input_length,
                     output_length, hash_ids of 512-token blocks), sent open loop
  --speed X,Y        load points: timestamps ÷ X, each speed a point (default ${
  TRACE_SCENARIOS.trace.speeds.join(",")
})
  --trace-warmup N   requests sent unmeasured first (default ${DEFAULT_TRACE_WARMUP}); the window
                     then lasts --duration, or to the trace's end, or --requests`;

function fail(msg: string): never {
  console.error(`bench:routing: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function number(flag: string, v: string | undefined, min: number, max: number, int = true): number {
  const n = Number(v);
  if (
    v === undefined || v.trim() === "" || !(n >= min && n <= max) || (int && !Number.isInteger(n))
  ) {
    fail(`${flag} needs ${int ? "an integer" : "a number"} in ${min}..${max}, got ${v}`);
  }
  return n;
}

/** The value of `flag` in `args` (`--flag V` or `--flag=V`), or undefined. */
function peek(args: string[], flag: string): string | undefined {
  const i = args.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
  return i < 0 ? undefined : args[i].includes("=") ? args[i].split(/=(.*)/s, 2)[1] : args[i + 1];
}

/** Flags that shape the synthetic workload only, refused with `--trace`. */
const SYNTHETIC_ONLY = ["--rate", "--concurrency", "--warmup", "--tenants", "--tenant-skew"];

/** Parses the command line. */
export function parseOptions(args: string[]): Options {
  let rates: number[] | null = null;
  let concurrency: number[] = [];
  let speeds: number[] | null = null;
  const tracePath = peek(args, "--trace");
  const replay = args.some((a) => a === "--trace" || a.startsWith("--trace="));
  if (replay && !tracePath) fail("--trace needs a file");
  const name = peek(args, "--scenario") ?? (replay ? "trace" : "standard");
  const known = replay ? TRACE_SCENARIOS : SCENARIOS;
  if (!(name in known)) {
    fail(
      `--scenario is one of ${Object.keys(known).join(", ")}` +
        (replay ? " with --trace" : " (the trace scenarios need --trace FILE)"),
    );
  }
  // A trace scenario sets the fleet; the synthetic fields keep standard's values, unused.
  const sc: ScenarioDefaults = SCENARIOS[replay ? "standard" : name as keyof typeof SCENARIOS];
  const traceSc: TraceScenarioDefaults | null = replay
    ? TRACE_SCENARIOS[name as keyof typeof TRACE_SCENARIOS]
    : null;
  const fleet = traceSc ?? sc;
  const o: Options & { quick: boolean } = {
    workers: fleet.workers,
    points: [],
    duration: NaN,
    warmup: NaN,
    drain: 15,
    requests: null,
    trace: replay ? { path: tracePath ?? "", warmup: DEFAULT_TRACE_WARMUP } : null,
    targets: null,
    seed: 0,
    tenants: sc.tenants,
    tenantSkew: sc.tenantSkew,
    systemTokens: sc.systemTokens,
    scenario: name as Scenario,
    simArgs: [...fleet.simArgs],
    json: null,
    connectionMode: "http",
    charsPerToken: null,
    gatewayRoot: null,
    quick: false,
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.includes("=") ? a.split(/=(.*)/s, 2) : [a, undefined];
    const value = () => inline ?? args[++i];
    const list = () => (value() ?? "").split(",").map((x) => x.trim()).filter(Boolean);
    if (replay && SYNTHETIC_ONLY.includes(flag)) {
      fail(
        `${flag} shapes the synthetic workload; a trace replay takes --speed and --trace-warmup`,
      );
    }
    switch (flag) {
      case "--": // `deno task bench:routing -- ...` passes it through
        break;
      case "--scenario": // read above
      case "--trace":
        if (inline === undefined) i++;
        break;
      case "--speed":
        if (!replay) fail("--speed replays a trace: give --trace FILE");
        speeds = list().map((x) => number(flag, x, 0.01, 1000, false));
        break;
      case "--trace-warmup":
        if (!replay) fail("--trace-warmup replays a trace: give --trace FILE");
        o.trace!.warmup = number(flag, value(), 0, 10_000_000);
        break;
      case "--tenant-skew":
        o.tenantSkew = number(flag, value(), 0, 10, false);
        break;
      case "--workers":
        o.workers = number(flag, value(), 1, 64);
        break;
      case "--rate":
        rates = list().map((x) => number(flag, x, 0.01, 10_000, false));
        break;
      case "--concurrency":
        concurrency = list().map((x) => number(flag, x, 1, 10_000));
        break;
      case "--duration":
        o.duration = number(flag, value(), 1, 3600, false);
        break;
      case "--warmup":
        o.warmup = number(flag, value(), 0, 600, false);
        break;
      case "--drain":
        o.drain = number(flag, value(), 0, 600, false);
        break;
      case "--requests":
      case "--max-requests":
        o.requests = number(flag, value(), 1, 10_000_000);
        break;
      case "--targets":
        o.targets = list();
        break;
      case "--tenants":
        o.tenants = number(flag, value(), 1, 10_000);
        break;
      case "--seed":
        o.seed = number(flag, value(), 0, 2 ** 31 - 1);
        break;
      case "--sim":
        o.simArgs = [...fleet.simArgs, ...(value() ?? "").split(/\s+/).filter(Boolean)];
        break;
      case "--quick":
        o.quick = true;
        break;
      case "--chars-per-token":
        o.charsPerToken = number(flag, value(), 1, 1024, false);
        break;
      case "--json":
        o.json = value() ?? fail("--json needs a path");
        break;
      case "--gateway-root": {
        const dir = value() ?? fail("--gateway-root needs a directory");
        o.gatewayRoot = dir.endsWith("/") ? dir : dir + "/";
        break;
      }
      case "--connection-mode": {
        const m = value();
        if (m !== "http" && m !== "grpc" && m !== "http-kv") {
          fail("--connection-mode is http, grpc or http-kv");
        }
        o.connectionMode = m;
        break;
      }
      case "-h":
      case "--help":
        console.log(USAGE);
        Deno.exit(0);
        break;
      default:
        fail(`unknown argument ${a}`);
    }
  }
  if (o.simArgs.some((a) => a.split("=")[0] === "--chars-per-token")) {
    fail("give --chars-per-token N, not in --sim, so that the prompts are sized for it");
  }
  if (o.charsPerToken !== null) {
    if (o.connectionMode !== "http") {
      fail(
        `--chars-per-token is HTTP only: --connection-mode ${o.connectionMode} tokenizes with Qwen3`,
      );
    }
    o.simArgs.push("--chars-per-token", String(o.charsPerToken));
  }
  o.points = replay ? speedPoints(speeds ?? traceSc!.speeds) : ratePoints(rates, concurrency, sc);
  if (Number.isNaN(o.duration)) o.duration = o.quick ? 5 : 10;
  if (Number.isNaN(o.warmup)) o.warmup = replay ? 0 : o.quick ? 2 : 4;
  const { quick: _, ...options } = o;
  return options;
}

/** A trace's load points: one per speed. */
function speedPoints(speeds: number[]): LoadPoint[] {
  return speeds.map((speed) => ({ label: `trace at ${speed}×`, load: { speed } }));
}

/** The synthetic workload's load points: the rates (or the scenario's), then the concurrencies. */
function ratePoints(
  rates: number[] | null,
  concurrency: number[],
  sc: ScenarioDefaults,
): LoadPoint[] {
  const defaults = rates === null && concurrency.length === 0;
  return [
    ...(rates ?? (concurrency.length ? [] : sc.rates)).map((rate, i, all) => ({
      label: `${
        defaults
          ? (i === 0 ? "light, " : i === all.length - 1 ? "near saturation, " : "medium, ")
          : ""
      }open loop ${rate} req/s`,
      load: { rate },
    })),
    ...concurrency.map((c) => ({ label: `closed loop ${c} users`, load: { concurrency: c } })),
  ];
}
