/**
 * The PD variant's command line and workload (`pd.ts`): options with their usage text, and the
 * seeded one-off prompts of each size mix.
 */

import { type Random, seededRandom } from "../../lib/core/clock.ts";
import { mix, words } from "./workload.ts";

/** Prompt size distributions, in simulated tokens: a draw from `random`. */
export const SIZES: Record<string, { about: string; draw: (random: Random) => number }> = {
  mixed: {
    about: "log-uniform over 64–8,192 tokens",
    draw: (random) => Math.round(64 * Math.pow(8192 / 64, random())),
  },
  "two-size": {
    about: "80 % of 256 tokens, 20 % of 4,096",
    draw: (random) => random() < 0.8 ? 256 : 4096,
  },
};

/** The command line. */
export interface PdOptions {
  prefill: number;
  decode: number;
  rates: number[];
  workloads: string[];
  policies: string[];
  duration: number;
  warmup: number;
  drain: number;
  seeds: number[];
  json: string | null;
}

const USAGE = `usage: deno task bench:pd [options]
  --prefill N        prefill workers (default 4)
  --decode N         decode workers (default 2)
  --rate LIST        open-loop request rates, req/s (default 3,8)
  --workloads LIST   prompt size mixes: ${Object.keys(SIZES).join(", ")} (default: all)
  --policies LIST    prefill-leg policies (default bucket,round_robin,random)
  --duration S       measured seconds per run (default 30)
  --warmup S         unrecorded seconds before it (default 10: bucket adapts every 5 s)
  --drain S          seconds for requests in flight afterwards (default 15)
  --seeds LIST       workload seeds; each adds a run per cell (default 0)
  --json PATH        write every figure as JSON`;

function fail(msg: string): never {
  console.error(`bench:pd: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function num(flag: string, v: string | undefined, min: number, max: number): number {
  const n = Number(v);
  if (v === undefined || v === "" || !Number.isFinite(n) || n < min || n > max) {
    fail(`${flag} needs a number in ${min}..${max}, got ${v}`);
  }
  return n;
}

/** Parses the command line; exits 2 with the usage on a bad one. */
export function parsePdOptions(args: string[]): PdOptions {
  const o: PdOptions = {
    prefill: 4,
    decode: 2,
    rates: [3, 8],
    workloads: Object.keys(SIZES),
    policies: ["bucket", "round_robin", "random"],
    duration: 30,
    warmup: 10,
    drain: 15,
    seeds: [0],
    json: null,
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].includes("=")
      ? args[i].split(/=(.*)/s, 2)
      : [args[i], undefined];
    const value = () => inline ?? args[++i];
    const list = () => (value() ?? "").split(",").map((x) => x.trim()).filter(Boolean);
    switch (flag) {
      case "--":
        break;
      case "--prefill":
        o.prefill = Math.floor(num(flag, value(), 1, 32));
        break;
      case "--decode":
        o.decode = Math.floor(num(flag, value(), 1, 32));
        break;
      case "--rate":
        o.rates = list().map((x) => num(flag, x, 0.01, 1000));
        break;
      case "--workloads":
        o.workloads = list();
        for (const w of o.workloads) if (!(w in SIZES)) fail(`unknown workload '${w}'`);
        break;
      case "--policies":
        o.policies = list();
        break;
      case "--duration":
        o.duration = num(flag, value(), 1, 3600);
        break;
      case "--warmup":
        o.warmup = num(flag, value(), 0, 600);
        break;
      case "--drain":
        o.drain = num(flag, value(), 0, 600);
        break;
      case "--seeds":
        o.seeds = list().map((x) => Math.floor(num(flag, x, 0, 2 ** 31 - 1)));
        break;
      case "--json":
        o.json = value() ?? fail("--json needs a path");
        break;
      case "-h":
      case "--help":
        console.log(USAGE);
        Deno.exit(0);
        break;
      default:
        fail(`unknown argument ${args[i]}`);
    }
  }
  if (!o.rates.length || !o.workloads.length || !o.policies.length || !o.seeds.length) {
    fail("--rate, --workloads, --policies and --seeds need at least one value");
  }
  return o;
}

/** Request `n` of a seeded stream: its prompt (unique from its first word) and size. */
export function prompt(
  workload: string,
  seed: number,
  n: number,
): { text: string; tokens: number } {
  const random = seededRandom(mix(seed, 0x9d, n));
  const tokens = SIZES[workload].draw(random);
  return { text: words(random, tokens, `r${n}`), tokens };
}
