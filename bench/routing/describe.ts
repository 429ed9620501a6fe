/**
 * The routing benchmark's preamble: what the fleet, the workload and the references were, printed
 * above the tables. One function per workload: the synthetic one (`workload.ts`) and a trace
 * replay (`replay.ts`), with the replay's plan and the trace's offline figures.
 */

import type { OracleAssignment } from "./references.ts";
import type { ReplayPlan } from "./replay.ts";
import { fmt } from "./report.ts";
import type { TraceRequest } from "./trace.ts";
import type { WorkloadConfig } from "./workload.ts";

/** The workers' tokenizer, as the preamble states it. */
export interface TokenizerFacts {
  /** Their `--chars-per-token`, or null for the default word chunks. */
  charsPerToken: number | null;
  /** Characters per token it gives on `sample`. */
  measured: number;
  /** The text measured, e.g. `the tenants' system prompts`. */
  sample: string;
}

/** How the run went: fleet size, knobs, tokenizer, elapsed time. */
export interface RunFacts {
  /** Workers per fleet. */
  workers: number;
  /** The workers' tokenizer. */
  tokenizer: TokenizerFacts;
  /** The fleet's sim-worker flags, and ref:upper-bound's. */
  simKnobs: string[];
  upperKnobs: string[];
  /** Measurements done and seconds they took. */
  measurements: number;
  elapsedS: number;
}

const took = (f: RunFacts) =>
  `${f.measurements} measurements in ${Math.floor(f.elapsedS / 60)} min ${f.elapsedS % 60} s`;

/** The preamble's sentence on the workers' tokens, which prompt sizes are counted in. */
export function tokenizerLine(t: TokenizerFacts): string {
  const measured = `${t.measured.toFixed(2)} characters per token on ${t.sample}`;
  return t.charsPerToken === null
    ? `Engine tokens: the workers' default tokenizer (whitespace runs, word chunks of at most 4 ` +
      `characters; ${measured}); prompt sizes are counted in them.\n`
    : `Engine tokens: \`--chars-per-token ${t.charsPerToken}\` on every worker (content-defined ` +
      `pieces; ${measured}); prompt sizes are counted in them.\n`;
}

const upperBound = (f: RunFacts, what: string) =>
  `ref:upper-bound = 1 × \`smg sim-worker ${f.upperKnobs.join(" ")}\`, sent the ${what} directly.`;

/** The synthetic workload's preamble. */
export function syntheticPreamble(
  f: RunFacts,
  w: WorkloadConfig,
  warmupS: number,
  durationS: number,
  oracle: OracleAssignment,
): string[] {
  return [
    `Fleet: ${f.workers} × \`smg sim-worker ${f.simKnobs.join(" ")}\`. Workload: seed ${w.seed}, ` +
    `${w.tenants} tenants (system prompts ${
      w.systemTokens.join("–")
    } tokens, Zipf ${w.tenantSkew}), ` +
    `${w.oneOffShare * 100} % one-off prompts, conversations of ${w.turns.join("–")} turns, ` +
    `user messages ${w.userTokens.join("–")} tokens, max_tokens ${w.outputTokens.join("–")}, ` +
    `think time ${w.thinkMs} ms (exp.); ${warmupS} s warm-up + ${durationS} s measured; ` +
    `${took(f)}.\n`,
    tokenizerLine(f.tokenizer),
    `References: ${upperBound(f, "workload")} ref:oracle = our gateway --policy ` +
    `consistent_hashing, X-SMG-Target-Worker by tenant: ${
      oracle.worker.map((wi, k) => `t${k}→w${wi + 1}`).join(" ")
    } (expected load per worker ${oracle.share.map((x) => (x * 100).toFixed(1)).join("/")} %).\n`,
  ];
}

/** What a replay's preamble says about the trace. */
export interface TraceFacts {
  /** The trace file. */
  path: string;
  /** Its requests. */
  requests: readonly TraceRequest[];
  /** Distinct conversation keys, and the most requests sharing one. */
  keys: number;
  largestKey: number;
  /** Each load point's plan and bound, by label. */
  points: { label: string; plan: ReplayPlan; bound: number | null }[];
  /** The seed of the block texts. */
  seed: number;
}

/** A trace replay's preamble. */
export function tracePreamble(f: RunFacts, t: TraceFacts, targets: string[]): string[] {
  const r = t.requests;
  const spanS = (r[r.length - 1].timestampMs - r[0].timestampMs) / 1000;
  const lines = [
    `Fleet: ${f.workers} × \`smg sim-worker ${f.simKnobs.join(" ")}\`. Trace: \`${t.path}\`, ` +
    `${fmt(r.length)} requests over ${fmt(spanS)} s, replayed open loop at timestamp ÷ speed, ` +
    `each as one user message of its blocks' seeded texts (seed ${t.seed}) with max_tokens = its ` +
    `output length; ${took(f)}.\n`,
    tokenizerLine(f.tokenizer),
  ];
  for (const p of t.points) {
    const measured = r.slice(p.plan.from, p.plan.to);
    const tokens = measured.reduce((a, x) => a + x.inputLength, 0);
    lines.push(
      `- ${p.label}: requests ${p.plan.from}–${p.plan.to - 1} measured ` +
        `(${fmt(measured.length)}, mean input ${fmt(tokens / Math.max(1, measured.length))} ` +
        `tokens) after ${p.plan.from} unmeasured, in a ${fmt(p.plan.durationMs / 1000, 1)}-s ` +
        `window opening ${fmt(p.plan.warmupMs / 1000, 1)} s in; offered ${
          fmt(tokens / Math.max(1e-3, p.plan.durationMs / 1000))
        } prompt tokens/s; infinite-cache bound ${
          p.bound === null ? "–" : `${(p.bound * 100).toFixed(1)} %`
        }.`,
    );
  }
  lines.push("");
  const refs = [
    ...(targets.includes("ref:upper-bound") ? [upperBound(f, "trace")] : []),
    ...(targets.includes("ref:affinity")
      ? [
        `ref:affinity = our gateway --policy consistent_hashing, X-SMG-Routing-Key = the ` +
        `request's conversation key (${fmt(t.keys)} keys for ${fmt(r.length)} requests, at most ` +
        `${t.largestKey} requests on one).`,
      ]
      : []),
  ];
  if (refs.length) lines.push(`References: ${refs.join(" ")}\n`);
  return lines;
}
