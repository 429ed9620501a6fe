/**
 * The HA mesh chaos bench, on real router processes in network namespaces it creates (see
 * chaos_netns.ts): detection after SIGKILL at each `--n`, false DOWNs over `--soak-secs` at
 * `--loss` % loss and with one router paused 2 s every 10 s, and idle mesh traffic per router.
 * Prints a markdown summary on stdout (progress on stderr) and writes `--json FILE`. Needs root
 * (namespaces) and `nft` where the kernel has no netem (`apt-get install nftables`).
 *
 *   deno task bench:mesh-chaos -- [--n 3,5] [--kills 20] [--soak-secs 600] [--loss 10]
 *     [--idle-secs 60] [--poll-ms 20] [--seed 1] [--only detect|loss|pause|idle ...] [--json F]
 *
 * Everything it starts it stops by PID, and every namespace it creates it deletes, on success,
 * error or SIGINT/SIGTERM; stale `smgc-*` namespaces of an earlier run are deleted first.
 */

import { parseArgs } from "node:util";
import { runDetect } from "./chaos_detect.ts";
import { runIdle } from "./chaos_idle.ts";
import { cleanStale, Testbed } from "./chaos_netns.ts";
import { ProcessGroup } from "./chaos_proc.ts";
import { type ChaosResults, markdown } from "./chaos_report.ts";
import { runSoak } from "./chaos_soak.ts";
import { taskArgs } from "../task_args.ts";

/** The experiments, in the order they run. */
const EXPERIMENTS = ["detect", "idle", "loss", "pause"] as const;
type Experiment = typeof EXPERIMENTS[number];

/** Parsed command line. */
export interface ChaosOptions {
  /** Cluster sizes for detection (default [3, 5]). */
  sizes: number[];
  /** Kills per size (default 20). */
  kills: number;
  /** Length of each soak, s (default 600). */
  soakSecs: number;
  /** Loss of the loss soak, % (default 10). */
  lossPct: number;
  /** Idle measurement window, s (default 60). */
  idleSecs: number;
  /** Detection poll period, ms (default 20). */
  pollMs: number;
  /** Seed of the victim choice (default 1). */
  seed: number;
  /** Experiments to run (default all). */
  only: Experiment[];
  /** Where to write the JSON results (default none). */
  json: string | null;
}

/** Parses `args` into options with defaults; throws on a bad value. */
export function parseChaosArgs(args: string[]): ChaosOptions {
  const { values } = parseArgs({
    args,
    options: {
      n: { type: "string", default: "3,5" },
      kills: { type: "string", default: "20" },
      "soak-secs": { type: "string", default: "600" },
      loss: { type: "string", default: "10" },
      "idle-secs": { type: "string", default: "60" },
      "poll-ms": { type: "string", default: "20" },
      seed: { type: "string", default: "1" },
      only: { type: "string", multiple: true },
      json: { type: "string" },
    },
  });
  const num = (name: string, v: string, min: number) => {
    const x = Number(v);
    if (!Number.isFinite(x) || x < min) {
      throw new Error(`--${name} must be a number ≥ ${min}: "${v}"`);
    }
    return x;
  };
  const only = (values.only ?? [...EXPERIMENTS]).flatMap((s) => s.split(",")).map((s) => {
    if (!(EXPERIMENTS as readonly string[]).includes(s)) {
      throw new Error(`--only takes ${EXPERIMENTS.join("|")}: "${s}"`);
    }
    return s as Experiment;
  });
  return {
    sizes: values.n.split(",").map((s) => num("n", s, 2)),
    kills: num("kills", values.kills, 1),
    soakSecs: num("soak-secs", values["soak-secs"], 1),
    lossPct: num("loss", values.loss, 0),
    idleSecs: num("idle-secs", values["idle-secs"], 1),
    pollMs: num("poll-ms", values["poll-ms"], 5),
    seed: num("seed", values.seed, 0),
    only,
    json: values.json ?? null,
  };
}

async function machine(procs: ProcessGroup): Promise<Record<string, string>> {
  // Through `cat`: Deno reads /proc only with --allow-all, which the task does not grant.
  const cpuinfo = (await procs.run("cat", ["/proc/cpuinfo"])).stdout;
  const cpu = cpuinfo.match(/model name\s*:\s*(.*)/)?.[1];
  const git = await procs.run("git", [
    "-C",
    new URL("../..", import.meta.url).pathname,
    "describe",
    "--always",
    "--dirty",
  ]);
  return {
    cores: String(navigator.hardwareConcurrency),
    cpu: cpu ?? "?",
    kernel: Deno.osRelease(),
    deno: Deno.version.deno,
    commit: git.stdout.trim() || "?",
  };
}

async function main(): Promise<number> {
  const opts = parseChaosArgs(taskArgs());
  if (Deno.uid() !== 0) throw new Error("run as root: the bench creates network namespaces");
  const procs = new ProcessGroup();
  const started = new Date();
  const logDir = `/tmp/smg-chaos-${started.toISOString().replace(/[:.]/g, "-")}`;
  await Deno.mkdir(logDir, { recursive: true });
  const stale = await cleanStale(procs);
  if (stale.length) console.error(`deleted stale namespaces: ${stale.join(" ")}`);
  const bed = new Testbed(procs, { size: Math.max(5, ...opts.sizes) });
  let cleaned: Promise<void> | null = null;
  const cleanup = () =>
    cleaned ??= (async () => {
      await procs.stopAll();
      await bed.destroy();
    })();
  const onSignal = async () => {
    console.error("interrupted: stopping routers and deleting namespaces");
    await cleanup();
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const results: ChaosResults = {
    command: `deno task bench:mesh-chaos -- ${Deno.args.join(" ")}`.trim(),
    machine: await machine(procs),
    started: started.toISOString(),
    logDir,
    detectPollMs: opts.pollMs,
    errors: {},
  };
  try {
    await bed.create();
    for (const exp of EXPERIMENTS.filter((e) => opts.only.includes(e))) {
      console.error(`== ${exp} (${new Date().toISOString()})`);
      try {
        if (exp === "detect") {
          results.detect = await runDetect(procs, bed, {
            sizes: opts.sizes,
            kills: opts.kills,
            pollMs: opts.pollMs,
            seed: opts.seed,
            logDir,
          });
        } else if (exp === "idle") {
          results.idle = await runIdle(procs, bed, { windowSecs: opts.idleSecs, logDir });
        } else {
          results[exp] = await runSoak(procs, bed, {
            mode: exp,
            soakSecs: opts.soakSecs,
            lossPct: opts.lossPct,
            logDir,
          });
        }
      } catch (e) {
        results.errors[exp] = (e as Error).message;
        console.error(`${exp} failed: ${(e as Error).stack}`);
      }
    }
  } finally {
    await cleanup();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
  const left = procs.live();
  if (left.length) console.error(`still running (should not be): ${left.join(", ")}`);
  console.log(markdown(results));
  if (opts.json) await Deno.writeTextFile(opts.json, JSON.stringify(results, null, 2) + "\n");
  return Object.keys(results.errors).length ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main());
