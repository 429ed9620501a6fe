/**
 * `bench:virtual`'s report: one target's replay (`replay.ts`) in, one summary row out, and the
 * rows as a markdown table. Figures are `bench:routing`'s (`../report.ts`), in virtual ms:
 * TTFT over the measured requests that finished; cache hit Σcached ÷ Σprompt over the measured
 * requests (the engines' own results) and, as `bench:routing` reads it, over the workers'
 * counters from the window's opening to the end of the drain (warm-up requests admitted then
 * count, measured ones admitted before do not); cache_aware's prediction check over the measured
 * requests (shares within ±0.05 as the gateway's histogram buckets them, (−0.05, 0.05]; cached
 * tokens predicted ÷ reported); token spread max ÷ mean of the workers' prompt tokens, over the
 * window's counters as `bench:routing` has it.
 */

import { round } from "../../overhead/stats.ts";
import { fmt, maxOverMean, percentile } from "../report.ts";
import type { ReplayResult } from "./replay.ts";

/** One target, summarised. */
export interface VirtualSummary {
  /** Target name. */
  target: string;
  /** Measured requests sent, finished and failed (cut at the drain or refused). */
  sent: number;
  ok: number;
  failed: number;
  /** Client TTFT over finished measured requests, virtual ms. */
  ttftMeanMs: number | null;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
  /** Client end-to-end p50, virtual ms. */
  e2eP50Ms: number | null;
  /** Σcached ÷ Σprompt over the measured requests. */
  cacheHit: number | null;
  /** The same over the workers' counters in the window (`bench:routing`'s figure). */
  windowCacheHit: number | null;
  /**
   * Σcached ÷ Σprompt over the measured follow-ups: requests of a conversation (`trace_keys.ts`)
   * an earlier request was sent for; null without conversations or follow-ups.
   */
  followUpHit: number | null;
  /** Max ÷ mean of per-worker prompt tokens over the window's counters. */
  spreadTokens: number | null;
  /** The same over the measured requests alone. */
  measuredSpreadTokens: number | null;
  /** Mean prompt tokens of the measured requests (the engines' count). */
  meanPromptTokens: number | null;
  /** The prediction check over the measured requests, or null when nothing was predicted. */
  prediction: { checked: number; within5: number; ratio: number | null } | null;
  /** Timers fired and rounds driven (a round: the timers due at one instant), virtual seconds and
   * wall seconds the replay took. */
  events: number;
  rounds: number;
  virtualS: number;
  wallS: number;
}

/**
 * Summarises one replay of `target` over `workers` workers; `conversations` are the trace's
 * conversation keys, by request index.
 */
export function summariseVirtual(
  target: string,
  r: ReplayResult,
  workers: number,
  conversations: readonly string[] | null = null,
): VirtualSummary {
  const measured = r.records.filter((x) => x.measured);
  const ok = measured.filter((x) => x.ok);
  const ttft = ok.map((x) => x.ttftMs).filter((x): x is number => x !== null);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const prompt = sum(ok.map((x) => x.promptTokens));
  const cached = sum(ok.map((x) => x.cachedTokens));
  const windowPrompt = r.after.map((a, i) => a.promptTokens - r.before[i].promptTokens);
  const windowCached = r.after.map((a, i) => a.cachedTokens - r.before[i].cachedTokens);
  const perWorker = new Array<number>(workers).fill(0);
  for (const x of measured) if (x.worker >= 0) perWorker[x.worker] += x.promptTokens;
  const checks = ok.flatMap((x) => x.prediction ?? []);
  const reported = sum(checks.map((c) => c.reported));
  // Requests arrive in index order: one is a follow-up when its key's first request came before.
  const first = new Map<string, number>();
  conversations?.forEach((k, i) => first.has(k) || first.set(k, i));
  const followUps = conversations === null
    ? []
    : ok.filter((x) => first.get(conversations[x.index])! < x.index);
  const followPrompt = sum(followUps.map((x) => x.promptTokens));
  const r1 = (x: number | null) => x === null ? null : round(x, 1);
  return {
    target,
    sent: measured.length,
    ok: ok.length,
    failed: measured.length - ok.length,
    ttftMeanMs: ttft.length ? round(sum(ttft) / ttft.length, 1) : null,
    ttftP50Ms: r1(percentile(ttft, 0.5)),
    ttftP99Ms: r1(percentile(ttft, 0.99)),
    e2eP50Ms: r1(percentile(ok.map((x) => x.e2eMs), 0.5)),
    cacheHit: prompt > 0 ? round(cached / prompt, 3) : null,
    windowCacheHit: sum(windowPrompt) > 0 ? round(sum(windowCached) / sum(windowPrompt), 3) : null,
    followUpHit: followPrompt > 0
      ? round(sum(followUps.map((x) => x.cachedTokens)) / followPrompt, 3)
      : null,
    spreadTokens: maxOverMean(windowPrompt),
    measuredSpreadTokens: maxOverMean(perWorker),
    meanPromptTokens: ok.length ? round(prompt / ok.length, 0) : null,
    prediction: checks.length === 0 ? null : {
      checked: checks.length,
      // The histogram's bucket (−0.05, 0.05].
      within5: round(
        checks.filter((c) => c.error > -0.05 && c.error <= 0.05).length / checks.length,
        3,
      ),
      ratio: reported > 0 ? round(sum(checks.map((c) => c.predicted)) / reported, 2) : null,
    },
    events: r.events,
    rounds: r.rounds,
    virtualS: round(r.virtualMs / 1000, 1),
    wallS: round(r.wallMs / 1000, 2),
  };
}

const pct = (x: number | null | undefined) => x == null ? "–" : `${(x * 100).toFixed(1)} %`;

/** The summaries as one markdown table, in the order given. */
export function virtualMarkdown(rows: readonly VirtualSummary[]): string {
  const head = [
    "target",
    "sent",
    "failed",
    "TTFT mean ms",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "cache hit",
    "follow-up hit",
    "hit (window counters)",
    "predictions ±0.05",
    "predicted ÷ reported",
    "spread tokens",
    "events",
    "wall s",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => i ? "---:" : "---").join("|")}|`,
  ];
  for (const s of rows) {
    lines.push(
      `| ${
        [
          s.target,
          fmt(s.sent),
          fmt(s.failed),
          fmt(s.ttftMeanMs),
          fmt(s.ttftP50Ms),
          fmt(s.ttftP99Ms),
          pct(s.cacheHit),
          pct(s.followUpHit),
          pct(s.windowCacheHit),
          pct(s.prediction?.within5),
          fmt(s.prediction?.ratio ?? null, 2),
          fmt(s.spreadTokens, 2),
          fmt(s.events),
          fmt(s.wallS, 1),
        ].join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}
