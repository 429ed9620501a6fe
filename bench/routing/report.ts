/**
 * The routing benchmark's report: one measurement's client records and worker counter deltas in,
 * one summary row out (ok/failed, throughput, TTFT and end-to-end percentiles, cluster cache-hit
 * rate from the workers' own counters, the follow-ups' hit from the client's, load spread), then a markdown table per load point (with
 * each row's cache hit ÷ the upper bound's and TTFT ÷ the oracle's, `verdict.ts`; on a trace also
 * cache hit ÷ the infinite-cache bound) and the JSON file written by `--json`.
 */

import { round } from "../overhead/stats.ts";
import type { DriveResult, RequestRecord } from "./client.ts";
import type { WorkerCounters } from "./fleet.ts";
import type { Summary } from "./summary.ts";
import { type PointVerdict, relative } from "./verdict.ts";

/**
 * Σ cached ÷ Σ prompt tokens (the client's usage) over the measured ok follow-ups of `records`:
 * requests whose conversation an earlier-sent request had; null when there are none.
 */
export function followUpHit(records: readonly RequestRecord[]): number | null {
  const seen = new Set<string>();
  let prompt = 0;
  let cached = 0;
  for (const r of [...records].sort((a, b) => a.sentAtMs - b.sentAtMs)) {
    if (r.conversation === undefined) continue;
    if (r.measured && r.ok && seen.has(r.conversation)) {
      prompt += r.usage?.promptTokens ?? 0;
      cached += r.usage?.cachedTokens ?? 0;
    }
    seen.add(r.conversation);
  }
  return prompt > 0 ? round(cached / prompt, 3) : null;
}

/**
 * The mean TTFT floor of a trace window (`Summary.ttftFloorMs`): `meanPromptTokens` (as the
 * workers counted them) × (1 − `bound`) ÷ the wall-clock prefill speed (`--prefill-tps` ÷
 * `--time-scale`, the last of each in `simArgs`), in ms; null when a figure is missing.
 */
export function ttftFloorMs(
  meanPromptTokens: number | null,
  bound: number | null,
  simArgs: readonly string[],
): number | null {
  const last = (flag: string) => {
    const i = simArgs.lastIndexOf(flag);
    return i < 0 ? null : Number(simArgs[i + 1]);
  };
  const tps = last("--prefill-tps");
  const scale = last("--time-scale") ?? 1;
  if (meanPromptTokens === null || bound === null || !tps || !(scale > 0)) return null;
  return round((meanPromptTokens * (1 - bound)) / (tps / scale) * 1000, 0);
}

/**
 * `Summary.engineTtftMeanMs`: Σ of the workers' first-token seconds ÷ their count, in wall ms
 * (simulated seconds × `--time-scale`, the last in `simArgs`); null when no first token was counted.
 */
export function engineTtftMs(workers: readonly WorkerCounters[], simArgs: readonly string[]) {
  const n = workers.reduce((a, w) => a + w.firstTokens, 0);
  const i = simArgs.lastIndexOf("--time-scale");
  const scale = i < 0 ? 1 : Number(simArgs[i + 1]);
  if (n <= 0 || !(scale >= 0)) return null;
  return round(workers.reduce((a, w) => a + w.ttftSeconds, 0) / n * 1000 * scale, 1);
}

/** The `q` quantile of `xs` (nearest rank), or null when empty. */
export function percentile(xs: number[], q: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

/** Max ÷ mean of `xs` to `digits` places (1.00: perfectly even), or null when the mean is 0. */
export function maxOverMean(xs: number[], digits = 2): number | null {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return xs.length && mean > 0 ? round(Math.max(...xs) / mean, digits) : null;
}

/** Summarises one measurement. */
export function summarise(
  point: string,
  target: string,
  d: DriveResult,
  workers: WorkerCounters[],
  cpuBusyPct: (number | null)[],
): Summary {
  const measured = d.records.filter((r) => r.measured);
  const ok = measured.filter((r) => r.ok);
  const spanS = Math.max(d.measuredSpanMs / 1000, 1e-3);
  const outTokens = ok.reduce((a, r) => a + (r.usage?.completionTokens ?? 0), 0);
  const ttft = ok.map((r) => r.ttftMs).filter((x): x is number => x !== null);
  const e2e = ok.map((r) => r.e2eMs);
  const prompt = workers.reduce((a, w) => a + w.promptTokens, 0);
  const cached = workers.reduce((a, w) => a + w.cachedTokens, 0);
  const requests = workers.reduce((a, w) => a + w.requests, 0);
  const clientPrompt = ok.reduce((a, r) => a + (r.usage?.promptTokens ?? 0), 0);
  const clientCached = ok.reduce((a, r) => a + (r.usage?.cachedTokens ?? 0), 0);
  const r1 = (x: number | null) => x === null ? null : round(x, 1);
  return {
    point,
    target,
    sent: measured.length,
    ok: ok.length,
    failed: measured.length - ok.length,
    cut: d.cut,
    offeredRps: round(measured.length / Math.max(d.windowMs / 1000, 1e-3), 2),
    rps: round(ok.length / spanS, 2),
    outTokPerS: round(outTokens / spanS, 0),
    ttftMeanMs: ttft.length > 0 ? round(ttft.reduce((a, b) => a + b, 0) / ttft.length, 1) : null,
    ttftP50Ms: r1(percentile(ttft, 0.5)),
    ttftP99Ms: r1(percentile(ttft, 0.99)),
    e2eP50Ms: r1(percentile(e2e, 0.5)),
    e2eP99Ms: r1(percentile(e2e, 0.99)),
    cacheHitRate: prompt > 0 ? round(cached / prompt, 3) : null,
    clientCacheHitRate: clientPrompt > 0 ? round(clientCached / clientPrompt, 3) : null,
    followUpHitRate: followUpHit(d.records),
    spreadTokens: maxOverMean(workers.map((w) => w.promptTokens)),
    spreadUncached: maxOverMean(workers.map((w) => w.promptTokens - w.cachedTokens)),
    spreadRequests: maxOverMean(workers.map((w) => w.requests)),
    meanPromptTokens: requests > 0 ? round(prompt / requests, 0) : null,
    workers,
    cpuBusyPct,
    errors: [...new Set(measured.filter((r) => !r.ok).map((r) => r.error ?? "?"))].slice(0, 3),
  };
}

/** `v` with thousands separators and `digits` decimals, or "–" for null. */
export const fmt = (v: number | null, digits = 0) =>
  v === null ? "–" : v.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });

/** `x` as a percentage with one decimal, or "–". */
const pct = (x: number | null | undefined) => x == null ? "–" : `${(x * 100).toFixed(1)} %`;

/**
 * One markdown table of the summaries of `point`, in the order given. On a trace (rows with a
 * `cacheBound`) the bound is stated above it and each row's cache hit ÷ the bound added.
 */
export function markdown(point: string, rows: Summary[]): string {
  const here = rows.filter((r) => r.point === point);
  const bound = here.find((r) => r.cacheBound != null)?.cacheBound ?? null;
  const floor = here.find((r) => r.ttftFloorMs != null)?.ttftFloorMs ?? null;
  const head = [
    "target",
    "sent/s",
    "ok",
    "failed",
    "req/s",
    "out tok/s",
    "TTFT mean ms",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "engine TTFT ms",
    "E2E p50 ms",
    "E2E p99 ms",
    "cache hit",
    "follow-up hit",
    "hit ÷ UB",
    ...(bound === null ? [] : ["hit ÷ ∞"]),
    "p50 ÷ oracle",
    "p99 ÷ oracle",
    "spread tokens",
    "spread uncached",
    "spread reqs",
    "CPU0/CPU1 %",
  ];
  const lines = [
    `### ${point}`,
    "",
    ...(bound === null ? [] : [
      `Infinite-cache bound over the window's requests (offline, warm-up as history): ` +
      `${pct(bound)}.` +
      (floor === null
        ? ""
        : ` Mean TTFT floor (each request alone on its worker, prefilling what the bound leaves ` +
          `uncached): ${fmt(floor)} ms.`),
      "",
    ]),
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => i < 1 ? "---" : "---:").join("|")}|`,
  ];
  for (const s of here) {
    const rel = relative(s, rows);
    lines.push(
      `| ${
        [
          s.target,
          fmt(s.offeredRps, 1),
          fmt(s.ok),
          fmt(s.failed),
          fmt(s.rps, 2),
          fmt(s.outTokPerS),
          fmt(s.ttftMeanMs),
          fmt(s.ttftP50Ms),
          fmt(s.ttftP99Ms),
          fmt(s.engineTtftMeanMs ?? null),
          fmt(s.e2eP50Ms),
          fmt(s.e2eP99Ms),
          pct(s.cacheHitRate),
          pct(s.followUpHitRate),
          fmt(rel.hitOfUpper, 2),
          ...(bound === null ? [] : [
            fmt(s.cacheHitRate === null || bound <= 0 ? null : s.cacheHitRate / bound, 2),
          ]),
          fmt(rel.p50VsOracle, 2),
          fmt(rel.p99VsOracle, 2),
          fmt(s.spreadTokens, 2),
          fmt(s.spreadUncached, 2),
          fmt(s.spreadRequests, 2),
          s.cpuBusyPct.map((x) => x ?? "?").join("/"),
        ].join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}

/** Everything `--json` writes. */
export interface Results {
  /** Date, CPUs, kernel, tool versions and pinning. */
  machine: Record<string, unknown>;
  /** Options, workload, simulator knobs and the exact commands. */
  settings: Record<string, unknown>;
  /** Targets skipped, with the reason. */
  skipped: Record<string, string>;
  /** Seconds all the measurements took. */
  elapsedS: number;
  /** One row per (load point, target). */
  summary: Summary[];
  /** `smg:cache_aware` against the references, per load point. */
  verdict: PointVerdict[];
}

/** Writes `results` to `path` as indented JSON. */
export async function writeJson(path: string, results: Results): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify(results, null, 2) + "\n");
}

/** A markdown table of the prediction checks of the rows that have one, or null. */
export function predictionMarkdown(rows: Summary[]): string | null {
  const have = rows.filter((r) => r.prediction);
  if (have.length === 0) return null;
  const lines = [
    "| load point | target | checked | mean error | within ±0.05 | within ±0.25 | predicted ÷ reported |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of have) {
    const p = r.prediction!;
    lines.push(
      `| ${r.point} | ${r.target} | ${p.checked} | ${fmt(p.meanError, 3)} | ${pct(p.within5)} | ${
        pct(p.within25)
      } | ${fmt(p.ratio, 2)} |`,
    );
  }
  return lines.join("\n");
}

/** A markdown table of the several-router rows' cost, or null when there are none. */
export function routersMarkdown(rows: Summary[]): string | null {
  const have = rows.filter((r) => r.routers);
  if (have.length === 0) return null;
  const lines = [
    "| load point | target | routers | mesh | follow-up hit | router CPU µs/req | tree bytes/req |",
    "| --- | --- | ---: | --- | ---: | ---: | ---: |",
  ];
  for (const r of have) {
    const c = r.routers!;
    lines.push(
      `| ${r.point} | ${r.target} | ${c.n} | ${c.mesh ? "yes" : "no"} | ${
        pct(r.followUpHitRate)
      } | ${fmt(c.cpuUsPerRequest)} | ${fmt(c.treeBytesPerRequest)} |`,
    );
  }
  return lines.join("\n");
}
