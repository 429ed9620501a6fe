/**
 * The routing guard's verdicts (`guard.ts`), pure: a cell's figures from one `bench:routing` run
 * (`cellFigures`), a baseline made of repeated runs (`baselineOf`: each figure's mean and its
 * noise, the largest distance of a run from that mean), and what got worse beyond noise
 * (`judge`): a figure is worse when it moved the bad way by more than twice its noise and more
 * than its floor (`FLOORS`, what this 2-core machine's run-to-run spread gives at least).
 *
 * TTFT is judged as the judged target's over the cell's reference in the same run (the machine's
 * speed drifts between runs; a ratio within one run does not): cache_aware over round robin, or in
 * a mesh cell cache_aware on several meshed routers over one router; cache hit, the follow-ups'
 * hit (÷ the reference's in a mesh cell) and the prediction check as they are.
 */

import type { Summary } from "./summary.ts";

/** The figures the guard judges, with the direction that is better. */
export const FIGURES = {
  /** The judged target's mean TTFT ÷ the reference's in the same run. */
  ttftMeanVsRr: "lower",
  /** The judged target's p99 TTFT ÷ the reference's. */
  ttftP99VsRr: "lower",
  /** The judged target's mean TTFT, ms (shown; judged through the ratio). */
  ttftMeanMs: "info",
  /** Workers' cache hit under the judged target (Σcached ÷ Σprompt). */
  hit: "higher",
  /** The judged target's follow-up hit ÷ the reference's (mesh cells). */
  followUpVsRef: "higher",
  /** Share of cache_aware's predictions within ±0.05 of the reported cached share. */
  within5: "higher",
  /** |predicted ÷ reported cached tokens − 1|. */
  ratioError: "lower",
  /** Requests that failed (any target). */
  failed: "lower",
} as const;

/** A figure's name. */
export type Figure = keyof typeof FIGURES;

/** One run's figures of a cell (null: not measured). */
export type CellFigures = Partial<Record<Figure, number | null>>;

/** Least movement counted as a change, per figure (absolute, in the figure's unit). */
export const FLOORS: Record<Figure, number> = {
  ttftMeanVsRr: 0.06,
  ttftP99VsRr: 0.1,
  ttftMeanMs: Infinity,
  hit: 0.01,
  followUpVsRef: 0.03,
  within5: 0.03,
  ratioError: 0.05,
  failed: 0,
};

/** A baseline figure: its mean over the runs and their largest distance from it. */
export interface BaseFigure {
  mean: number;
  noise: number;
  runs: number[];
}

/** A cell's baseline. */
export type CellBaseline = Partial<Record<Figure, BaseFigure>>;

/** What a cell compares: the target judged and its reference in the same run. */
export interface CellTargets {
  judged: string;
  reference: string;
}

/** cache_aware against round robin: every cell's but the mesh cells'. */
export const CACHE_AWARE_VS_RR: CellTargets = {
  judged: "smg:cache_aware",
  reference: "smg:round_robin",
};

/** The guard's figures of `rows` (one `bench:routing` run of a cell comparing `t`). */
export function cellFigures(
  rows: readonly Summary[],
  t: CellTargets = CACHE_AWARE_VS_RR,
): CellFigures {
  const ca = rows.find((r) => r.target === t.judged);
  const rr = rows.find((r) => r.target === t.reference);
  const ratio = (a: number | null | undefined, b: number | null | undefined) =>
    a != null && b != null && b > 0 ? a / b : null;
  const p = ca?.prediction ?? null;
  return {
    ttftMeanVsRr: ratio(ca?.ttftMeanMs, rr?.ttftMeanMs),
    ttftP99VsRr: ratio(ca?.ttftP99Ms, rr?.ttftP99Ms),
    ttftMeanMs: ca?.ttftMeanMs ?? null,
    hit: ca?.cacheHitRate ?? null,
    followUpVsRef: t === CACHE_AWARE_VS_RR ? null : ratio(ca?.followUpHitRate, rr?.followUpHitRate),
    within5: p?.within5 ?? null,
    ratioError: p?.ratio != null ? Math.abs(p.ratio - 1) : null,
    failed: rows.reduce((n, r) => n + r.failed, 0),
  };
}

/** Each figure's mean and noise over repeated runs of one cell. */
export function baselineOf(runs: readonly CellFigures[]): CellBaseline {
  const out: CellBaseline = {};
  for (const f of Object.keys(FIGURES) as Figure[]) {
    const xs = runs.map((r) => r[f]).filter((x): x is number => x != null);
    if (xs.length === 0) continue;
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const noise = Math.max(...xs.map((x) => Math.abs(x - mean)));
    out[f] = { mean, noise, runs: xs };
  }
  return out;
}

/** One figure's verdict. */
export interface Verdict {
  figure: Figure;
  base: number;
  now: number;
  /** Movement allowed either way: max(floor, 2 × noise). */
  tolerance: number;
  verdict: "worse" | "better" | "same" | "info";
}

/** Each figure of `now` against `base`, the noise of `noise` (default: `base`'s own). */
export function judge(base: CellBaseline, now: CellFigures, noise: CellBaseline = base): Verdict[] {
  const out: Verdict[] = [];
  for (const f of Object.keys(FIGURES) as Figure[]) {
    const b = base[f];
    const x = now[f];
    if (b === undefined || x == null) continue;
    const tolerance = Math.max(FLOORS[f], 2 * (noise[f]?.noise ?? 0));
    const dir = FIGURES[f];
    const up = x - b.mean;
    let verdict: Verdict["verdict"] = "same";
    if (dir === "info") verdict = "info";
    else if (Math.abs(up) > tolerance) {
      verdict = (up > 0) === (dir === "higher") ? "better" : "worse";
    }
    out.push({ figure: f, base: b.mean, now: x, tolerance, verdict });
  }
  return out;
}
