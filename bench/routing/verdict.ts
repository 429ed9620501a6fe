/**
 * The routing benchmark's judgement against its references (`references.ts`): per load point,
 * every target's cache-hit rate as a share of `ref:upper-bound`'s and its TTFT p50/p99 as a
 * ratio to `ref:oracle`'s; and for `smg:cache_aware` its targets: cache hit ≥ 0.90
 * of the upper bound, TTFT p50 and p99 ≤ 1.15 × the oracle's, p99 below every HAProxy and nginx
 * peer's, and an advantage over `smg:round_robin` (TTFT p50 ratio, cache-hit difference) that
 * grows from the first load point to the last.
 */

import { round } from "../overhead/stats.ts";
import type { Summary } from "./summary.ts";

/** Cache hit as a share of the upper bound's: at least this. */
export const HIT_TARGET = 0.9;
/** TTFT p50 and p99 as a ratio to the oracle's: at most this. */
export const LATENCY_TARGET = 1.15;
/** The policy judged, and the baseline its advantage is measured against. */
export const JUDGED = "smg:cache_aware";
export const BASELINE = "smg:round_robin";

/** One target's figures relative to the references at one load point (null: not measured). */
export interface Relative {
  /** Cache-hit rate ÷ `ref:upper-bound`'s. */
  hitOfUpper: number | null;
  /** TTFT p50 and p99 ÷ `ref:oracle`'s. */
  p50VsOracle: number | null;
  p99VsOracle: number | null;
}

const ratio = (a: number | null | undefined, b: number | null | undefined, digits = 2) =>
  a == null || b == null || b <= 0 ? null : round(a / b, digits);

/** `s` relative to the reference rows among `rows` (same load point). */
export function relative(s: Summary, rows: Summary[]): Relative {
  const at = (name: string) => rows.find((r) => r.point === s.point && r.target === name);
  const upper = at("ref:upper-bound");
  const oracle = at("ref:oracle");
  return {
    hitOfUpper: ratio(s.cacheHitRate, upper?.cacheHitRate),
    p50VsOracle: ratio(s.ttftP50Ms, oracle?.ttftP50Ms),
    p99VsOracle: ratio(s.ttftP99Ms, oracle?.ttftP99Ms),
  };
}

/** The judged policy at one load point. */
export interface PointVerdict {
  point: string;
  /** Its figures relative to the references. */
  relative: Relative;
  /** Cache hit ≥ `HIT_TARGET` of the upper bound; p50 and p99 ≤ `LATENCY_TARGET` × oracle. */
  hitMet: boolean | null;
  p50Met: boolean | null;
  p99Met: boolean | null;
  /** Its TTFT p99 is below every peer's; the peer with the lowest p99 (name, ms). */
  p99BeatsPeers: boolean | null;
  bestPeer: { target: string; ttftP99Ms: number } | null;
  /** Round robin's TTFT p50 ÷ its own (above 1: it is faster). */
  p50AdvantageRatio: number | null;
  /** Its cache-hit rate − round robin's, in percentage points. */
  hitAdvantagePoints: number | null;
}

const atMost = (x: number | null, limit: number) => x === null ? null : x <= limit;

/** The judged policy's verdict at `point`, or null when it was not measured there. */
export function pointVerdict(rows: Summary[], point: string): PointVerdict | null {
  const here = rows.filter((r) => r.point === point);
  const s = here.find((r) => r.target === JUDGED);
  if (!s) return null;
  const rel = relative(s, rows);
  const peers = here.filter((r) => /^(haproxy|nginx):/.test(r.target) && r.ttftP99Ms !== null);
  const best = peers.reduce<Summary | null>(
    (a, r) => a === null || r.ttftP99Ms! < a.ttftP99Ms! ? r : a,
    null,
  );
  const rr = here.find((r) => r.target === BASELINE);
  return {
    point,
    relative: rel,
    hitMet: rel.hitOfUpper === null ? null : rel.hitOfUpper >= HIT_TARGET,
    p50Met: atMost(rel.p50VsOracle, LATENCY_TARGET),
    p99Met: atMost(rel.p99VsOracle, LATENCY_TARGET),
    p99BeatsPeers: best === null || s.ttftP99Ms === null ? null : s.ttftP99Ms < best.ttftP99Ms!,
    bestPeer: best && { target: best.target, ttftP99Ms: best.ttftP99Ms! },
    p50AdvantageRatio: ratio(rr?.ttftP50Ms, s.ttftP50Ms),
    hitAdvantagePoints: rr?.cacheHitRate == null || s.cacheHitRate === null
      ? null
      : round((s.cacheHitRate - rr.cacheHitRate) * 100, 1),
  };
}

/** Whether the advantage over round robin grows from the first point's verdict to the last's. */
export function advantageGrows(
  first: PointVerdict,
  last: PointVerdict,
): { p50: boolean | null; hit: boolean | null } {
  const grows = (a: number | null, b: number | null) => a === null || b === null ? null : b > a;
  return {
    p50: grows(first.p50AdvantageRatio, last.p50AdvantageRatio),
    hit: grows(first.hitAdvantagePoints, last.hitAdvantagePoints),
  };
}

const met = (x: boolean | null) => x === null ? "n/a" : x ? "met" : "**not met**";
const num = (x: number | null | undefined, digits = 2) => x == null ? "–" : x.toFixed(digits);
const ms = (x: number | null | undefined) => x == null ? "–" : `${Math.round(x)} ms`;
const ms1 = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(1)} ms`;
const pct = (x: number | null | undefined) => x == null ? "–" : `${(x * 100).toFixed(1)} %`;
const signed = (x: number | null) => x === null ? "–" : `${x >= 0 ? "+" : ""}${x.toFixed(1)}`;

/** Markdown lines judging `smg:cache_aware` at each of `points` (in order), then the trend. */
export function verdictMarkdown(rows: Summary[], points: string[]): string[] {
  const lines: string[] = [];
  const verdicts: PointVerdict[] = [];
  for (const point of points) {
    const v = pointVerdict(rows, point);
    if (!v) continue;
    verdicts.push(v);
    const get = (name: string) => rows.find((r) => r.point === point && r.target === name);
    const s = get(JUDGED)!;
    const [ub, or, rr] = [get("ref:upper-bound"), get("ref:oracle"), get(BASELINE)];
    const r = v.relative;
    lines.push(
      `- **${point}, ${JUDGED}:** cache hit ${pct(s.cacheHitRate)} = ${num(r.hitOfUpper)} × ` +
        `the upper bound's ${pct(ub?.cacheHitRate)} (≥ ${HIT_TARGET}: ${met(v.hitMet)}); ` +
        `TTFT p50 ${ms(s.ttftP50Ms)} = ${num(r.p50VsOracle)} × the oracle's ${ms(or?.ttftP50Ms)} ` +
        `(≤ ${LATENCY_TARGET}: ${met(v.p50Met)}), p99 ${ms(s.ttftP99Ms)} = ` +
        `${num(r.p99VsOracle)} × ${ms(or?.ttftP99Ms)} (${met(v.p99Met)}); p99 below every peer: ` +
        `${v.p99BeatsPeers === null ? "n/a" : v.p99BeatsPeers ? "yes" : "**no**"} (best peer ` +
        `${v.bestPeer ? `${v.bestPeer.target} ${ms(v.bestPeer.ttftP99Ms)}` : "–"}, margin ` +
        `${v.bestPeer && s.ttftP99Ms !== null ? ms1(v.bestPeer.ttftP99Ms - s.ttftP99Ms) : "–"}); ` +
        `against ` +
        `round_robin: TTFT p50 ${num(v.p50AdvantageRatio)}× lower (${ms(rr?.ttftP50Ms)} → ` +
        `${ms(s.ttftP50Ms)}), cache hit ${signed(v.hitAdvantagePoints)} points.`,
    );
  }
  if (verdicts.length >= 2) {
    const [first, last] = [verdicts[0], verdicts[verdicts.length - 1]];
    const g = advantageGrows(first, last);
    const word = (x: boolean | null) => x === null ? "n/a" : x ? "grows" : "**does not grow**";
    lines.push(
      `- **Advantage over round_robin, ${first.point} → ${last.point}:** TTFT p50 ratio ` +
        `${num(first.p50AdvantageRatio)} → ${num(last.p50AdvantageRatio)} (${word(g.p50)}), ` +
        `cache-hit difference ${signed(first.hitAdvantagePoints)} → ` +
        `${signed(last.hitAdvantagePoints)} points (${word(g.hit)}).`,
    );
  }
  return lines;
}

/** Token spread (max ÷ mean per worker) the judged policy must stay within (balance goal). */
export const SPREAD_TARGET = 1.3;
/** The load-aware policies that must beat both baselines with the backlog scoring. */
export const LOAD_AWARE = ["smg:least_load", "smg:power_of_two"];
/** What they must beat on TTFT p50 and p99. */
export const LOAD_BASELINES = ["smg:round_robin", "haproxy:leastconn"];

/**
 * Markdown lines judging the balance goals at each of `points`: `smg:cache_aware`'s spread
 * (≤ `SPREAD_TARGET`) beside its latency ratios, and whether each load-aware policy beats every
 * baseline measured on TTFT p50 and p99.
 */
export function balanceMarkdown(rows: Summary[], points: string[]): string[] {
  const lines: string[] = [];
  for (const point of points) {
    const get = (name: string) => rows.find((r) => r.point === point && r.target === name);
    const s = get(JUDGED);
    if (s) {
      const r = relative(s, rows);
      const spreadMet = s.spreadTokens === null ? null : s.spreadTokens <= SPREAD_TARGET;
      lines.push(
        `- **${point}, ${JUDGED} balance:** TTFT p50 ${num(r.p50VsOracle)} and p99 ` +
          `${num(r.p99VsOracle)} × the oracle's (≤ ${LATENCY_TARGET}: ` +
          `${met(atMost(r.p50VsOracle, LATENCY_TARGET))}, ` +
          `${met(atMost(r.p99VsOracle, LATENCY_TARGET))}); token spread ${num(s.spreadTokens)} ` +
          `(≤ ${SPREAD_TARGET}: ${met(spreadMet)}), uncached ${num(s.spreadUncached)}.`,
      );
    }
    const bases = LOAD_BASELINES.map(get).filter((b): b is Summary => b !== undefined);
    for (const name of LOAD_AWARE) {
      const p = get(name);
      if (!p || bases.length === 0) continue;
      const beats = (k: "ttftP50Ms" | "ttftP99Ms") =>
        p[k] !== null && bases.every((b) => b[k] === null || p[k]! < b[k]!);
      const vs = bases.map((b) => `${b.target} ${ms(b.ttftP50Ms)}/${ms(b.ttftP99Ms)}`).join(", ");
      lines.push(
        `- **${point}, ${name}:** TTFT p50/p99 ${ms(p.ttftP50Ms)}/${ms(p.ttftP99Ms)} against ` +
          `${vs}: p50 ${met(beats("ttftP50Ms"))}, p99 ${met(beats("ttftP99Ms"))}.`,
      );
    }
  }
  return lines;
}
