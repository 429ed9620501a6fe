/**
 * The overhead benchmark's command line: flags in, an `Options` out. A bad flag prints the
 * usage and exits 2; `--help` prints it and exits 0.
 */

/** What one run measures, from the command line. */
export interface Options {
  /** Seconds per recorded wrk run. */
  duration: number;
  /** Seconds of the unrecorded warm-up at 64 connections. */
  warmup: number;
  /** Connection counts, one recorded run each. */
  conns: number[];
  /** How many times every target is measured (medians reported). */
  rounds: number;
  /** Where to write the JSON results, or null. */
  json: string | null;
  /** Also measure the gateway on Deno.serve and the floors: fetch, `Http1Client` behind Deno.serve, and behind a raw front. */
  floor: boolean;
  /** Measure the tiny non-streaming request (off with `--sse-only`). */
  tiny: boolean;
  /** Measure the paced SSE case (off with `--no-sse`). */
  sse: boolean;
  /** Another checkout whose gateway is measured beside this one (`--baseline DIR`), or null. */
  baseline: string | null;
}

/** The `--help` text. */
export const USAGE = `usage: deno task bench:overhead [options]
Targets: direct (one worker), gateway (main.ts), HAProxy, nginx; each loaded with a tiny
non-streaming request at every --conns count, then with paced SSE streams at 64 connections
(32 token events, each one timer tick of >= 1 ms after the last, then [DONE]).
  --duration S   seconds per recorded run (default 8; 3 with --quick)
  --warmup S     seconds of warm-up at 64 connections per target and case (default 2; 1 with
                 --quick)
  --conns A,B    connection counts of the tiny request (default 1,64)
  --rounds N     measure every target N times, report medians (default 1)
  --quick        short runs, for a smoke test
  --floor        also measure the gateway on Deno.serve (--http-server deno, as gateway_deno),
                 floor_proxy.ts (bare Deno.serve + fetch),
                 connect_floor_proxy.ts (bare Deno.serve + the gateway's Http1Client) and
                 raw_floor_proxy.ts (a bare HTTP/1.1 front on Deno.listen + Http1Client)
  --no-sse       skip the paced SSE case
  --sse-only     run only the paced SSE case
  --baseline DIR also measure the gateway of another checkout (DIR/main.ts, e.g. a git
                 worktree of an earlier commit) as gateway_baseline, in the same rounds
  --json PATH    also write the results as JSON`;

function fail(msg: string): never {
  console.error(`bench:overhead: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function positive(flag: string, v: string | undefined, max: number): number {
  const n = Number(v);
  if (v === undefined || !Number.isInteger(n) || n < 1 || n > max) {
    fail(`${flag} needs an integer in 1..${max}, got ${v}`);
  }
  return n;
}

/** Parses the command line. */
export function parseOptions(args: string[]): Options {
  let duration: number | null = null;
  let warmup: number | null = null;
  let conns = [1, 64];
  let rounds = 1;
  let quick = false;
  let json: string | null = null;
  let floor = false;
  let tiny = true;
  let sse = true;
  let baseline: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.includes("=") ? a.split("=", 2) : [a, undefined];
    const value = () => inline ?? args[++i];
    switch (flag) {
      case "--": // `deno task bench:overhead -- ...` passes it through
        break;
      case "--duration":
        duration = positive(flag, value(), 600);
        break;
      case "--warmup":
        warmup = positive(flag, value(), 60);
        break;
      case "--rounds":
        rounds = positive(flag, value(), 20);
        break;
      case "--conns": {
        const v = value() ?? "";
        conns = v.split(",").map((c) => positive(flag, c, 10_000));
        break;
      }
      case "--quick":
        quick = true;
        break;
      case "--floor":
        floor = true;
        break;
      case "--no-sse":
        sse = false;
        break;
      case "--sse-only":
        tiny = false;
        break;
      case "--json":
        json = value() ?? fail("--json needs a path");
        break;
      case "--baseline":
        baseline = value() ?? fail("--baseline needs a directory");
        break;
      case "-h":
      case "--help":
        console.log(USAGE);
        Deno.exit(0);
        break;
      default:
        fail(`unknown argument ${a}`);
    }
  }
  if (!tiny && !sse) fail("--no-sse and --sse-only leave nothing to measure");
  return {
    duration: duration ?? (quick ? 3 : 8),
    warmup: warmup ?? (quick ? 1 : 2),
    conns,
    rounds,
    json,
    floor,
    tiny,
    sse,
    baseline,
  };
}
