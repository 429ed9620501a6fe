/**
 * The routing benchmark's command line: flags in, an `Options` out. A bad flag prints the usage
 * and exits 2; `--help` prints it and exits 0. Also the fleet's default simulator knobs.
 */

/** One load point: open loop at a request rate, or closed loop at a concurrency. */
export interface LoadPoint {
  /** Row label in the report, e.g. `light (open loop, 3 req/s)`. */
  label: string;
  /** What the client offers. */
  load: { rate: number } | { concurrency: number };
}

/** What one run measures, from the command line. */
export interface Options {
  /** Simulated workers per fleet. */
  workers: number;
  /** Load points, in order. */
  points: LoadPoint[];
  /** Seconds of the measured window per (target, load point). */
  duration: number;
  /** Seconds of unrecorded warm-up before it. */
  warmup: number;
  /** Seconds to wait for requests in flight after the window. */
  drain: number;
  /** Cap on measured requests per (target, load point), or null. */
  requests: number | null;
  /** `--targets` entries, or null for the default list. */
  targets: string[] | null;
  /** Seed of the workload, the workers and the gateway's randomness. */
  seed: number;
  /** Tenants in the workload. */
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
  /** How the gateway talks to the workers (`--connection-mode`): http, or grpc (gateway tokenizes). */
  connectionMode: "http" | "grpc";
}

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

/** A scenario name. */
export type Scenario = keyof typeof SCENARIOS;

/** The `--help` text. */
export const USAGE = `usage: deno task bench:routing [options]
  --scenario NAME    defaults of the flags below: ${
  Object.entries(SCENARIOS).map(([k, v]) => `${k} (${v.about})`).join("; ")
} (default standard)
  --workers N        simulated workers per fleet (default 4)
  --rate A,B         open-loop load points in requests/s (default ${
  DEFAULT_RATES.join(",")
}; small-kv ${SCENARIOS["small-kv"].rates.join(",")})
  --concurrency A,B  closed-loop load points in concurrent users (added after any --rate points)
  --duration S       seconds of the measured window per target and point (default 10; 5 with --quick)
  --warmup S         seconds of unrecorded warm-up before it (default 4; 2 with --quick)
  --drain S          seconds to wait for requests in flight afterwards (default 15)
  --requests N       also stop a window after N measured requests
  --targets LIST     comma list of ref:upper-bound, ref:oracle, smg:<policy>, haproxy:<variant>,
                     nginx:<variant>, or the kinds ref, smg, haproxy, nginx, or all (default:
                     all, policies this build lacks skipped)
  --tenants N        tenants with their own system prompt (default 24)
  --tenant-skew X    Zipf exponent of tenant popularity, 0 uniform (default 1)
  --seed N           seed of the workload, workers and gateway (default 0)
  --sim "FLAGS"      extra sim-worker flags, after the defaults (e.g. "--kv-tokens 65536")
  --quick            short windows, for a smoke test
  --json PATH        also write the results as JSON
  --connection-mode grpc
                     the workers also serve sglang's scheduler gRPC service and our gateway
                     reaches them over it, tokenizing with Qwen3's tokenizer (HAProxy and nginx
                     targets are skipped; ref:upper-bound stays HTTP)`;

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

/** Parses the command line. */
export function parseOptions(args: string[]): Options {
  let rates: number[] | null = null;
  let concurrency: number[] = [];
  const si = args.findIndex((a) => a === "--scenario" || a.startsWith("--scenario="));
  const name = si < 0 ? "standard" : args[si].includes("=") ? args[si].split("=")[1] : args[si + 1];
  if (!(name in SCENARIOS)) fail(`--scenario is one of ${Object.keys(SCENARIOS).join(", ")}`);
  const sc: ScenarioDefaults = SCENARIOS[name as Scenario];
  const o: Options & { quick: boolean } = {
    workers: sc.workers,
    points: [],
    duration: NaN,
    warmup: NaN,
    drain: 15,
    requests: null,
    targets: null,
    seed: 0,
    tenants: sc.tenants,
    tenantSkew: sc.tenantSkew,
    systemTokens: sc.systemTokens,
    scenario: name as Scenario,
    simArgs: [...sc.simArgs],
    json: null,
    connectionMode: "http",
    quick: false,
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.includes("=") ? a.split(/=(.*)/s, 2) : [a, undefined];
    const value = () => inline ?? args[++i];
    const list = () => (value() ?? "").split(",").map((x) => x.trim()).filter(Boolean);
    switch (flag) {
      case "--": // `deno task bench:routing -- ...` passes it through
        break;
      case "--scenario": // read above
        if (inline === undefined) i++;
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
        o.simArgs = [...sc.simArgs, ...(value() ?? "").split(/\s+/).filter(Boolean)];
        break;
      case "--quick":
        o.quick = true;
        break;
      case "--json":
        o.json = value() ?? fail("--json needs a path");
        break;
      case "--connection-mode": {
        const m = value();
        if (m !== "http" && m !== "grpc") fail("--connection-mode is http or grpc");
        o.connectionMode = m as "http" | "grpc";
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
  const defaults = rates === null && concurrency.length === 0;
  o.points = [
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
  if (Number.isNaN(o.duration)) o.duration = o.quick ? 5 : 10;
  if (Number.isNaN(o.warmup)) o.warmup = o.quick ? 2 : 4;
  const { quick: _, ...options } = o;
  return options;
}
