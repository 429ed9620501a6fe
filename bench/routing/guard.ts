/**
 * The routing regression guard, `deno task bench:guard`: what to run before merging anything on
 * the request path or in the policies. It replays fixed cells of `bench:routing` (the shipped
 * Mooncake trace onto 8 workers with 256k-token caches at 2, 4, 8 and 16 characters per token,
 * at 2.5× and at 4× its pace, the same with each second's requests sent at once, and the
 * multi-turn chat workload at 8 characters a token), each with
 * `smg:round_robin` and `smg:cache_aware`, the same at 8 on a generated multi-turn conversation
 * trace (`conversation_trace.ts`), and that trace through three meshed routers behind a
 * round-robin front against one router (`mesh3-conv`), and prints, per cell, what moved beyond the noise
 * against the committed baseline (`guard_baseline.json`: the mean and spread of repeated runs), or
 * against another commit's gateway run alternately in the same session (`--against REF`). Exit 1
 * when something got worse. The simulated engines never share the gateway's assumption of
 * characters per token, so a cell catches what one tokenizer would hide.
 *
 * The workers, client and references are always this tree's; `--gateway`/`--against` take a
 * directory or a git commit-ish (checked out once under /tmp/smg-guard/), whose `main.ts` is run
 * as the gateway (`bench:routing --gateway-root`).
 */

import {
  baselineOf,
  CACHE_AWARE_VS_RR,
  type CellBaseline,
  type CellFigures,
  cellFigures,
  type CellTargets,
  judge,
} from "./guard_judge.ts";
import type { Summary } from "./summary.ts";
import { conversationTrace } from "./conversation_trace.ts";
import { taskArgs } from "../task_args.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEFAULT_BASELINE = `${ROOT}bench/routing/guard_baseline.json`;
const TRACE_CANDIDATES = [
  `${ROOT}../shared/data/mooncake_synthetic_trace.jsonl`,
  "/work/shared/data/mooncake_synthetic_trace.jsonl",
];

/**
 * A cell: `bench:routing` flags, after `--trace FILE` for the shipped trace (`trace: "shipped"`),
 * the same with each second's requests sent together (`"bursts"`: a batch client; decisions
 * taken in one turn of the event loop must see each other's load), or the generated
 * conversation trace (`"conversation"`, `conversation_trace.ts`).
 */
interface Cell {
  trace: "shipped" | "bursts" | "conversation" | null;
  args: string[];
  /** What it compares (default cache_aware against round robin). */
  targets?: CellTargets;
}

const TRACE = (cpt: number, speed: number, trace: Cell["trace"] = "shipped"): Cell => ({
  trace,
  args: [
    "--scenario",
    "trace-small-kv",
    "--speed",
    String(speed),
    "--chars-per-token",
    String(cpt),
    "--trace-warmup",
    "200",
    "--duration",
    "30",
    "--drain",
    "30",
  ],
});

/** The cells, in the order they run. */
export const CELLS: Record<string, Cell> = {
  "trace-cpt2": TRACE(2, 2.5),
  "trace-cpt4": TRACE(4, 2.5),
  "trace-cpt8": TRACE(8, 2.5),
  "trace-cpt16": TRACE(16, 2.5),
  "trace-cpt8-4x": TRACE(8, 4),
  "bursts-cpt8": TRACE(8, 2.5, "bursts"),
  "conv-cpt8": TRACE(8, 2.5, "conversation"),
  "chat-cpt8": {
    trace: null,
    args: ["--scenario", "small-kv", "--rate", "36", "--chars-per-token", "8", "--duration", "20"],
  },
  // Three meshed routers behind a round-robin front against one router, on the conversation
  // trace with 2M-token caches (where one router keeps a conversation's cache).
  "mesh3-conv": {
    trace: "conversation",
    args: TRACE(8, 2.5).args.map((a) => a === "trace-small-kv" ? "trace" : a),
    targets: { judged: "smg:cache_aware#3-mesh", reference: "smg:cache_aware" },
  },
};

const USAGE = `usage: deno task bench:guard [-- options]
  --cells LIST       cells to run (default all: ${Object.keys(CELLS).join(", ")})
  --repeats N        runs per cell and gateway (default 1; 2 with --write-baseline)
  --gateway REF      the gateway under test: a directory or a git commit-ish (default this tree)
  --against REF      compare with REF's gateway, run alternately in this session, instead of the
                     baseline (the baseline still gives the noise)
  --baseline FILE    (default bench/routing/guard_baseline.json)
  --write-baseline   write this session's runs as the baseline
  --trace FILE       the shipped Mooncake trace (default
                     ../shared/data/mooncake_synthetic_trace.jsonl); conv-* cells replay a
                     generated conversation trace (bench/routing/conversation_trace.ts)`;

interface Baseline {
  /** The commit of the last write, and of every cell without its own in `commits`. */
  commit: string;
  date: string;
  cells: Record<string, CellBaseline>;
  /** Each cell's commit, where a write covered only some cells. */
  commits?: Record<string, string>;
}

async function sh(cmd: string, args: string[], cwd = ROOT): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return new TextDecoder().decode(out.stdout).trim();
}

/** The gateway root of `ref`: a directory with main.ts, else a commit checked out once. */
async function rootOf(ref: string | null): Promise<{ root: string | null; label: string }> {
  if (ref === null) {
    return {
      root: null,
      label: `this tree (${await sh("git", ["rev-parse", "--short", "HEAD"])})`,
    };
  }
  try {
    if (Deno.statSync(`${ref}/main.ts`).isFile) return { root: ref, label: ref };
  } catch { /* a commit-ish */ }
  const sha = await sh("git", ["rev-parse", "--short", `${ref}^{commit}`]);
  const dir = `/tmp/smg-guard/${sha}`;
  try {
    Deno.statSync(`${dir}/main.ts`);
  } catch {
    await Deno.mkdir("/tmp/smg-guard", { recursive: true });
    await sh("git", ["worktree", "add", "--detach", "--force", dir, sha]);
  }
  return { root: dir, label: `${ref} (${sha})` };
}

/** Where each run's `bench:routing` JSON is kept, for a closer look. */
const RUNS_DIR = "/tmp/smg-guard/runs";

/** The generated conversation trace, written once. */
async function conversationFile(): Promise<string> {
  const path = "/tmp/smg-guard/conversation_trace.jsonl";
  const lines = conversationTrace();
  await Deno.mkdir("/tmp/smg-guard", { recursive: true });
  await Deno.writeTextFile(path, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  return path;
}

/** The shipped trace with every timestamp floored to its second, written once. */
async function burstsFile(shipped: string): Promise<string> {
  const path = "/tmp/smg-guard/shipped_bursts.jsonl";
  const lines = (await Deno.readTextFile(shipped)).split("\n").filter((l) => l.trim() !== "");
  const out = lines.map((l) => {
    const o = JSON.parse(l);
    return JSON.stringify({ ...o, timestamp: Math.floor(o.timestamp / 1000) * 1000 });
  });
  await Deno.mkdir("/tmp/smg-guard", { recursive: true });
  await Deno.writeTextFile(path, out.join("\n") + "\n");
  return path;
}

/** One `bench:routing` run of `cell` with `root`'s gateway: its summary rows. */
async function runCell(
  cell: Cell,
  trace: string | null,
  root: string | null,
  json: string,
): Promise<Summary[]> {
  const targets = cell.targets ?? CACHE_AWARE_VS_RR;
  const args = [
    "run",
    "--allow-run=taskset,haproxy,nginx,uname,cat",
    "--allow-read",
    "--allow-write=/tmp,.",
    "--allow-net=127.0.0.1",
    `${ROOT}bench/routing/run.ts`,
    ...(cell.trace ? ["--trace", trace!] : []),
    ...cell.args,
    "--targets",
    `${targets.reference},${targets.judged}`,
    "--json",
    json,
    ...(root ? ["--gateway-root", root] : []),
  ];
  const p = new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  });
  const out = await p.output();
  if (!out.success) throw new Error(`bench:routing exited ${out.code}`);
  return JSON.parse(await Deno.readTextFile(json)).summary as Summary[];
}

function fmt(x: number): string {
  return Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toFixed(3);
}

async function main(args: string[]): Promise<number> {
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i < 0 ? null : args[i + 1] ?? null;
  };
  if (args.includes("-h") || args.includes("--help")) {
    console.log(USAGE);
    return 0;
  }
  const write = args.includes("--write-baseline");
  const names = (flag("--cells")?.split(",") ?? Object.keys(CELLS)).filter(Boolean);
  for (const n of names) if (!(n in CELLS)) throw new Error(`unknown cell ${n}\n${USAGE}`);
  const repeats = Number(flag("--repeats") ?? (write ? 2 : 1));
  const baselinePath = flag("--baseline") ?? DEFAULT_BASELINE;
  const trace = flag("--trace") ??
    TRACE_CANDIDATES.find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    }) ?? null;
  const gw = await rootOf(flag("--gateway"));
  const against = flag("--against") === null ? null : await rootOf(flag("--against"));
  let baseline: Baseline | null = null;
  try {
    baseline = JSON.parse(await Deno.readTextFile(baselinePath));
  } catch { /* none yet */ }
  console.log(
    `Gateway: ${gw.label}; against ${
      against?.label ??
        `the baseline ${baseline ? `(${baseline.commit}, ${baseline.date})` : "(none)"}`
    }`,
  );
  const fresh: Record<string, CellBaseline> = {};
  let conversation: string | null = null;
  let bursts: string | null = null;
  await Deno.mkdir(RUNS_DIR, { recursive: true });
  console.log(`Each run's bench:routing JSON: ${RUNS_DIR}/`);
  let worse = 0;
  for (const name of names) {
    const cell = CELLS[name];
    if ((cell.trace === "shipped" || cell.trace === "bursts") && trace === null) {
      console.log(`\n## ${name}: skipped (no trace file; give --trace FILE)`);
      continue;
    }
    const file = cell.trace === "conversation"
      ? conversation ??= await conversationFile()
      : cell.trace === "bursts"
      ? bursts ??= await burstsFile(trace!)
      : trace;
    const mine: CellFigures[] = [];
    const theirs: CellFigures[] = [];
    for (let r = 0; r < repeats; r++) {
      // Alternate who goes first, so neither gets the quieter half of the session.
      const order = against && r % 2 === 1 ? [against, gw] : against ? [gw, against] : [gw];
      for (const side of order) {
        const json = `${RUNS_DIR}/${name}-${side === gw ? "gateway" : "against"}-${r + 1}.json`;
        const figures = cellFigures(await runCell(cell, file, side.root, json), cell.targets);
        (side === gw ? mine : theirs).push(figures);
      }
    }
    const now = baselineOf(mine);
    fresh[name] = now;
    const ref = against ? baselineOf(theirs) : baseline?.cells[name];
    const at = against || !baseline?.cells[name]
      ? ""
      : ` against ${baseline.commits?.[name] ?? baseline.commit}`;
    console.log(`\n## ${name} (${cell.args.join(" ")})${at}\n`);
    console.log(`| figure | ${against ? "against" : "baseline"} | now | tolerance | verdict |`);
    console.log("| --- | ---: | ---: | ---: | --- |");
    if (!ref) {
      for (const [f, b] of Object.entries(now)) {
        console.log(`| ${f} | – | ${fmt(b!.mean)} | – | new |`);
      }
      continue;
    }
    const flat: CellFigures = Object.fromEntries(Object.entries(now).map(([k, v]) => [k, v!.mean]));
    for (const v of judge(ref, flat, baseline?.cells[name] ?? ref)) {
      if (v.verdict === "worse") worse++;
      console.log(
        `| ${v.figure} | ${fmt(v.base)} | ${fmt(v.now)} | ±${fmt(v.tolerance)} | ${
          v.verdict === "worse" ? "**worse**" : v.verdict
        } |`,
      );
    }
  }
  if (write) {
    const commit = await sh("git", ["rev-parse", "--short", "HEAD"]);
    const earlier = Object.fromEntries(
      Object.keys(baseline?.cells ?? {}).map((
        c,
      ) => [c, baseline!.commits?.[c] ?? baseline!.commit]),
    );
    const out: Baseline = {
      commit,
      date: new Date().toISOString().slice(0, 10),
      cells: { ...baseline?.cells, ...fresh },
      commits: { ...earlier, ...Object.fromEntries(Object.keys(fresh).map((c) => [c, commit])) },
    };
    await Deno.writeTextFile(baselinePath, JSON.stringify(out, null, 2) + "\n");
    console.log(`\nwrote ${baselinePath}`);
  }
  console.log(
    `\n${
      worse === 0 ? "nothing got worse beyond noise" : `${worse} figure(s) got worse beyond noise`
    }`,
  );
  return worse === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main(taskArgs()));
