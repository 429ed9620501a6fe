/**
 * The load side of cache_aware: each candidate's expected wait (`--wait-model`, with the work
 * sent since its last load report credited), the per-request balance gate, KV-usage pressure,
 * and the choice among the workers holding a match. In: candidates with their loads and the
 * time; out: scores, verdicts and picks. Randomness comes from the policy's seeded `random`.
 */

import type { CacheAwareConfig } from "../../config/config.ts";
import { type Random, randomIndex } from "../../core/clock.ts";
import type { WorkerView } from "../../core/types.ts";
import {
  argminUniform,
  expectedWaits,
  type ExpectedWaitTuning,
  freshLoad,
  SinceReportCredit,
} from "../expected_wait.ts";

/** How busy cache_aware's candidates are, and which of them to prefer. */
export class Balance {
  readonly #c: CacheAwareConfig;
  readonly #tuning: ExpectedWaitTuning;
  readonly #maxAgeMs: number;
  readonly #random: Random;
  readonly #credit = new SinceReportCredit();
  /** Uncached tokens sent per worker id, decayed over `workHorizonSecs`, and when last decayed. */
  readonly #work = new Map<string, { value: number; at: number }>();

  /** Over `c`, least_load's `tuning`, reports younger than `maxAgeMs`. */
  constructor(
    c: CacheAwareConfig,
    tuning: ExpectedWaitTuning,
    maxAgeMs: number,
    random: Random,
  ) {
    this.#c = c;
    this.#tuning = tuning;
    this.#maxAgeMs = maxAgeMs;
    this.#random = random;
  }

  /**
   * `w` was sent `uncachedTokens` to prefill: until its next load report they count in its
   * expected wait, so misses between two reports spread instead of all landing on the
   * momentary argmin.
   */
  credit(w: WorkerView, uncachedTokens: number): void {
    this.#credit.add(w, uncachedTokens);
  }

  /** Forgets a removed worker's credit and recent work. */
  forget(workerId: string): void {
    this.#credit.forget(workerId);
    this.#work.delete(workerId);
  }

  /**
   * The uncached tokens `w` was sent recently, each decayed by e^(−age/τ), τ =
   * `--cache-aware-work-horizon-secs`: the work its conversations and prefixes draw to it over a
   * horizon longer than its momentary backlog.
   */
  recentWork(w: WorkerView, now: number): number {
    const e = this.#work.get(w.id);
    if (!e) return 0;
    const tau = this.#c.workHorizonSecs * 1000;
    return e.value * Math.exp(-Math.max(0, now - e.at) / tau);
  }

  /** `w` was sent `tokens` uncached tokens at `now`. */
  addWork(w: WorkerView, tokens: number, now: number): void {
    if (!(tokens > 0)) return;
    this.#work.set(w.id, { value: this.recentWork(w, now) + tokens, at: now });
  }

  /** Each candidate's expected wait. */
  waits(candidates: readonly WorkerView[], now: number): number[] {
    const loads = candidates.map((w) => freshLoad(w, now, this.#maxAgeMs));
    return expectedWaits(candidates, loads, (w) => this.#credit.tokens(w), this.#tuning).scores;
  }

  /**
   * The holder to use. By default the one with the lowest expected wait. With `--overlap-decay`
   * d > 0 each holder scores 1 / (1 + d·x), x = its queued uncached tokens above the least
   * backlogged holder's, in blocks per request block (holders without a report are not
   * decayed); the best score wins, expected wait breaks ties. With `--selection-temperature`
   * t > 0 the holder is sampled with weights exp((s′ − 1)/t) over the normalised scores.
   */
  leastBusy<W extends WorkerView>(holders: readonly W[], now: number, requestUnits: number): W {
    if (holders.length === 1) return holders[0];
    const waits = this.waits(holders, now);
    const c = this.#c;
    if (c.overlapDecay <= 0 && c.selectionTemperature <= 0) {
      return holders[argminUniform(waits, this.#random)];
    }
    const backlog = holders.map((w) =>
      freshLoad(w, now, this.#maxAgeMs)?.waitingUncachedTokens ?? null
    );
    const known = backlog.filter((b): b is number => b !== null);
    const least = known.length > 0 ? Math.min(...known) : 0;
    const blocks = Math.max(1, requestUnits / c.blockSize);
    const scores = backlog.map((b) =>
      c.overlapDecay > 0 && b !== null
        ? 1 / (1 + c.overlapDecay * ((b - least) / c.blockSize) / blocks)
        : 1
    );
    if (c.selectionTemperature > 0) {
      return holders[softmaxPick(scores, c.selectionTemperature, this.#random)];
    }
    const best = Math.max(...scores);
    const tied = holders.filter((_, i) => scores[i] === best);
    return tied[argminUniform(this.waits(tied, now), this.#random)];
  }

  /** The per-request gate: far busier than the mean by both margins. */
  gated(w: WorkerView, candidates: readonly WorkerView[]): boolean {
    let sum = 0;
    for (const c of candidates) sum += c.inFlight;
    const mean = sum / candidates.length;
    return w.inFlight > mean * this.#c.balanceRelThreshold &&
      w.inFlight > mean + this.#c.balanceAbsThreshold;
  }

  /** KV usage spread or ceiling above its threshold among fresh reports. */
  pressured(candidates: readonly WorkerView[], now: number): boolean {
    const c = this.#c;
    if (c.balanceTokenUsageThreshold >= 1 && c.overloadTokenUsageThreshold >= 1) return false;
    let max = -Infinity;
    let min = Infinity;
    for (const w of candidates) {
      const l = freshLoad(w, now, this.#maxAgeMs);
      if (!l) continue;
      max = Math.max(max, l.tokenUsage);
      min = Math.min(min, l.tokenUsage);
    }
    if (max === -Infinity) return false;
    return max > c.overloadTokenUsageThreshold || max - min > c.balanceTokenUsageThreshold;
  }
}

/** Samples an index with weights exp((s′ − 1)/t), s′ the min-max normalised score. */
function softmaxPick(scores: readonly number[], t: number, random: Random): number {
  const max = Math.max(...scores);
  const min = Math.min(...scores);
  if (max === min) return randomIndex(random, scores.length);
  const w = scores.map((s) => Math.exp(((s - min) / (max - min) - 1) / t));
  let r = random() * w.reduce((a, b) => a + b, 0);
  for (let i = 0; i < w.length; i++) {
    r -= w[i];
    if (r < 0) return i;
  }
  return w.length - 1;
}
