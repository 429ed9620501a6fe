/**
 * The expected-wait models, shared by `least_load`, `power_of_two` and cache_aware's misses. In:
 * candidates (their prefill backlog and in-flight count as this gateway knows them, their load
 * report and its age), the request's token count and the tuning. Out: one score per candidate,
 * lower is better.
 *
 * `--wait-model backlog` (the default, ours): the prompt tokens this gateway sent to the worker
 * that have not produced a first token yet (`WorkerView.prefillTokens`), plus in-flight /
 * (in-flight + 1), which only orders workers of equal backlog:
 *
 *   backlog + n/(n+1)
 *
 * It is exact and current, and it never rewards a busy worker: work leaves the backlog when the
 * worker has done it, so a slower worker keeps more and is sent less. Load reports are not read:
 * one is up to a poll interval old (10 s by default) while a prefill queue drains in well under a
 * second, so a stale report would keep an idle worker looking busy. Several gateways in front of
 * the same workers each balance their own share, and balanced shares add up to a balanced fleet.
 *
 * `--wait-model smg` (SMG's formula), in seconds:
 *
 *   (queued tokens + tokens credited since the last report) / throughput + λ·k/(1−k)
 *
 * Its throughput is the generation rate a worker reports, which grows with its batch: a busier
 * worker looks faster and is sent more (the feedback BENCHMARKS.md measures).
 *
 * Workers without a usable report are scored by drain time (in-flight × p̄ / nominal throughput)
 * when some candidate reports, and by raw in-flight count (join-shortest-queue) when none does.
 *
 * A report older than `STALE_INTERVALS` load-monitor intervals counts as absent: SMG keeps
 * a silent worker's last report forever and keeps steering by it. Credit ("work sent since the
 * last report") is keyed by worker id and reset by the arrival of a newer report, seen as a
 * changed `WorkerView.loadAt`; it is never decremented on completion (SMG does the same).
 */

import { defaultConfig, type GatewayConfig, type LeastLoadConfig } from "../config/config.ts";
import { type Random, randomIndex } from "../core/clock.ts";
import type { LoadSnapshot, RouteRequest, WorkerView } from "../core/types.ts";

/** The scoring knobs: least_load's tuning without the queue cap. */
export type ExpectedWaitTuning = Pick<
  LeastLoadConfig,
  "kvPressureWeight" | "defaultThroughput" | "meanPrefillTokens" | "waitModel"
>;

/** KV usage is clamped below 1 so the pressure term stays finite (≈ 999·λ at most). */
export const MAX_TOKEN_USAGE = 0.999;

/** A report older than this many load-monitor intervals is treated as absent. */
export const STALE_INTERVALS = 3;

/** least_load's defaults (what power_of_two always scores with). */
export function defaultTuning(): ExpectedWaitTuning {
  return sanitizeTuning(defaultConfig().leastLoad);
}

/** `t` with an invalid λ or throughput replaced by its default and p̄ ≥ 1, as SMG builds it. */
export function sanitizeTuning(t: ExpectedWaitTuning): ExpectedWaitTuning {
  const d = defaultConfig().leastLoad;
  const lambda = t.kvPressureWeight;
  const tput = t.defaultThroughput;
  const prefill = t.meanPrefillTokens;
  return {
    kvPressureWeight: Number.isFinite(lambda) && lambda >= 0 ? lambda : d.kvPressureWeight,
    defaultThroughput: Number.isFinite(tput) && tput > 0 ? tput : d.defaultThroughput,
    meanPrefillTokens: Number.isFinite(prefill) ? Math.max(1, prefill) : d.meanPrefillTokens,
    waitModel: t.waitModel === "smg" ? "smg" : "backlog",
  };
}

/** The backlog score: `backlog + n/(n+1)` (see the module comment). */
export function backlogScore(w: WorkerView): number {
  const n = Math.max(0, w.inFlight);
  return positive(w.prefillTokens) + n / (n + 1);
}

/** Age in ms past which a report is stale: `STALE_INTERVALS` × the load-monitor interval (≥ 1 s). */
export function reportMaxAgeMs(config: Pick<GatewayConfig, "loadMonitor">): number {
  return STALE_INTERVALS * Math.max(1, config.loadMonitor.intervalSecs) * 1000;
}

/** The worker's report if it has one no older than `maxAgeMs` at `now`, else null. */
export function freshLoad(w: WorkerView, now: number, maxAgeMs: number): LoadSnapshot | null {
  if (w.load === null) return null;
  return now - w.loadAt > maxAgeMs ? null : w.load;
}

/** `x` when it is a finite positive number, else 0 (reports may carry nulls or garbage). */
function positive(x: number | null): number {
  return x !== null && Number.isFinite(x) && x > 0 ? x : 0;
}

/** The KV-pressure term λ·k/(1−k), k clamped to [0, MAX_TOKEN_USAGE]. */
export function kvPressure(tokenUsage: number, lambda: number): number {
  const k = Math.min(positive(tokenUsage), MAX_TOKEN_USAGE);
  return lambda * k / (1 - k);
}

/** Token work queued on the worker: reported uncached tokens, else waiting requests × p̄. */
export function queuedTokens(load: LoadSnapshot, meanPrefillTokens: number): number {
  const reported = positive(load.waitingUncachedTokens);
  return reported > 0 ? reported : positive(load.waitingRequests) * meanPrefillTokens;
}

/** The worker's generation throughput (tok/s), or `defaultThroughput` when it reports none. */
export function throughputOf(load: LoadSnapshot, defaultThroughput: number): number {
  const t = positive(load.genThroughput);
  return t > 0 ? t : defaultThroughput;
}

/** Seconds of expected wait on a reporting worker, given the tokens credited since its report. */
export function reportedWait(
  load: LoadSnapshot,
  creditedTokens: number,
  tuning: ExpectedWaitTuning,
): number {
  const work = queuedTokens(load, tuning.meanPrefillTokens) + creditedTokens;
  return work / throughputOf(load, tuning.defaultThroughput) +
    kvPressure(load.tokenUsage, tuning.kvPressureWeight);
}

/** Mean of the positive reported throughputs among `loads`, else `defaultThroughput`. */
export function nominalThroughput(
  loads: readonly (LoadSnapshot | null)[],
  defaultThroughput: number,
): number {
  let sum = 0;
  let n = 0;
  for (const l of loads) {
    const t = l ? positive(l.genThroughput) : 0;
    if (t > 0) {
      sum += t;
      n++;
    }
  }
  return n > 0 ? sum / n : defaultThroughput;
}

/**
 * The request's prompt size in tokens: its token ids, else its text at its model's characters
 * per token (`RouteRequest.charsPerToken`).
 */
export function promptTokens(request: RouteRequest): number {
  const n = request.tokens?.length ?? 0;
  return n > 0 ? n : Math.ceil(request.text.length / request.charsPerToken);
}

/** Tokens a request adds to a worker: its token count when known, else p̄. */
export function requestTokens(request: RouteRequest, meanPrefillTokens: number): number {
  const n = request.tokens?.length ?? 0;
  return n > 0 ? n : meanPrefillTokens;
}

/** Seconds of expected wait on a worker without a usable report, at the candidates' nominal rate. */
export function drainWait(inFlight: number, nominal: number, meanPrefillTokens: number): number {
  return Math.max(0, inFlight) * meanPrefillTokens / nominal;
}

/** Scores for a candidate list, and whether none of them had a usable report. */
export interface WaitScores {
  /** Seconds of expected wait per candidate (raw in-flight counts when `dark`). */
  scores: number[];
  /** No candidate reported: the scores are in-flight counts (join-shortest-queue). */
  dark: boolean;
}

/**
 * Scores every candidate given its usable report (`loads[i]`, null when absent or stale) and
 * the tokens credited to it since that report; nominal throughput over these candidates only.
 * The array form of `minExpectedWait`, for callers that combine the scores with other signals.
 */
export function expectedWaits(
  candidates: readonly WorkerView[],
  loads: readonly (LoadSnapshot | null)[],
  creditedTokens: (w: WorkerView) => number,
  tuning: ExpectedWaitTuning,
): WaitScores {
  if (tuning.waitModel === "backlog") {
    return { scores: candidates.map((w) => backlogScore(w)), dark: false };
  }
  const dark = loads.every((l) => l === null);
  if (dark) return { scores: candidates.map((w) => Math.max(0, w.inFlight)), dark };
  const nominal = nominalThroughput(loads, tuning.defaultThroughput);
  const scores = candidates.map((w, i) => {
    const l = loads[i];
    return l === null
      ? drainWait(w.inFlight, nominal, tuning.meanPrefillTokens)
      : reportedWait(l, creditedTokens(w), tuning);
  });
  return { scores, dark };
}

/** Index of the lowest score (-1 for none); exact ties broken uniformly (reservoir sampling). */
export function argminUniform(scores: readonly number[], random: Random): number {
  let best = -1;
  let ties = 0;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i];
    if (best < 0 || s < scores[best]) {
      best = i;
      ties = 1;
    } else if (s === scores[best] && randomIndex(random, ++ties) === 0) {
      best = i;
    }
  }
  return best;
}

/** What the scorer reads besides the candidates. */
export interface WaitContext {
  /** Scoring knobs. */
  tuning: ExpectedWaitTuning;
  /** Clock reading (ms), for report age. */
  now: number;
  /** Reports older than this (ms) count as absent. */
  maxAgeMs: number;
  /** Tokens credited to a worker since its report. */
  credit: SinceReportCredit;
  /** Uniform draws for exact ties. */
  random: Random;
  /** Leaves out a worker with a usable report (the queue cap); default none. */
  skip?: (w: WorkerView, load: LoadSnapshot) => boolean;
}

/** The lowest expected wait among candidates: its index, its score, and whether none reported. */
export interface WaitPick {
  /** Index into the candidate list. */
  index: number;
  /** Seconds of expected wait, or the in-flight count when `dark`. */
  score: number;
  /** No considered candidate had a usable report: join-shortest-queue on in-flight (smg). */
  dark: boolean;
  /** Candidates left out by `skip`. */
  skipped: number;
}

/**
 * Argmin of the expected wait over `candidates` (those `ctx.skip` leaves out aside), exact ties
 * broken uniformly (reservoir sampling); null when every candidate is skipped. Nominal
 * throughput and "dark" are taken over the considered candidates only. Two passes, no
 * allocation: this runs on every request over the whole eligible list.
 */
export function minExpectedWait(
  candidates: readonly WorkerView[],
  ctx: WaitContext,
): WaitPick | null {
  const { tuning, now, maxAgeMs, skip } = ctx;
  let considered = 0;
  let reporting = 0;
  let tputSum = 0;
  let tputN = 0;
  for (const w of candidates) {
    const l = freshLoad(w, now, maxAgeMs);
    if (l !== null && skip?.(w, l)) continue;
    considered++;
    if (l === null) continue;
    reporting++;
    const t = positive(l.genThroughput);
    if (t > 0) {
      tputSum += t;
      tputN++;
    }
  }
  if (considered === 0) return null;
  const backlog = tuning.waitModel === "backlog";
  const dark = !backlog && reporting === 0;
  const nominal = tputN > 0 ? tputSum / tputN : tuning.defaultThroughput;
  let index = -1;
  let score = Infinity;
  let ties = 0;
  for (let i = 0; i < candidates.length; i++) {
    const w = candidates[i];
    const l = freshLoad(w, now, maxAgeMs);
    if (l !== null && skip?.(w, l)) continue;
    const s = backlog
      ? backlogScore(w)
      : dark
      ? Math.max(0, w.inFlight)
      : l === null
      ? drainWait(w.inFlight, nominal, tuning.meanPrefillTokens)
      : reportedWait(l, ctx.credit.tokens(w), tuning);
    if (index < 0 || s < score) {
      index = i;
      score = s;
      ties = 1;
    } else if (s === score && randomIndex(ctx.random, ++ties) === 0) {
      index = i;
    }
  }
  return { index, score, dark, skipped: candidates.length - considered };
}

/** Work credited to one worker since the report it had when first credited. */
interface Credit {
  loadAt: number;
  tokens: number;
  requests: number;
}

/**
 * Per-worker tally of what this policy sent since the worker's last load report. A tally is
 * void once the worker's `loadAt` differs from the one it was opened under (a newer report
 * already counts that work in its queue).
 */
export class SinceReportCredit {
  readonly #byId = new Map<string, Credit>();

  /** Tokens credited to `w` since its current report (0 after a newer one). */
  tokens(w: WorkerView): number {
    return this.#current(w)?.tokens ?? 0;
  }

  /** Requests credited to `w` since its current report (0 after a newer one). */
  requests(w: WorkerView): number {
    return this.#current(w)?.requests ?? 0;
  }

  /** Credits `w` with one request of `tokens` tokens. */
  add(w: WorkerView, tokens: number): void {
    const c = this.#current(w);
    if (c) {
      c.tokens += tokens;
      c.requests++;
    } else {
      this.#byId.set(w.id, { loadAt: w.loadAt, tokens, requests: 1 });
    }
  }

  /** Drops the tally of a worker that left the registry. */
  forget(workerId: string): void {
    this.#byId.delete(workerId);
  }

  #current(w: WorkerView): Credit | undefined {
    const c = this.#byId.get(w.id);
    return c && c.loadAt === w.loadAt ? c : undefined;
  }
}
