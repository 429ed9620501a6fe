/**
 * The routing history the status page charts: every `intervalMs` (1 s) the gateway's counters
 * and histograms are read, and the difference from the reading before becomes one sample
 * (requests/s, errors/s, decisions/s by policy branch); the latency quantiles, the cache
 * prediction error and the mesh's replication lag are taken over a trailing window of
 * `windowSamples` readings (10 s), as one second holds too few requests for a p99. The last
 * `keep` samples (five minutes) are kept, each numbered, so a page asks only for those it lacks.
 *
 * In: the `Metrics` families (read, never written) and the mesh's lag histogram; out:
 * `RoutingSample`s. A counter that went down (a reset) yields a zero rate, not a negative one.
 */

import { type Clock, pause } from "../core/clock.ts";
import { DURATION_BUCKETS, PREDICTION_ERROR_BUCKETS } from "../metrics/families.ts";
import type { FastCounter, HistogramSeries } from "../metrics/fast.ts";
import type { Metrics } from "../metrics/metrics.ts";
import {
  type HistogramReading,
  mean,
  quantile,
  readHistograms,
  shareWithin,
  windowBetween,
} from "./quantiles.ts";

/** One point of the routing history (the snapshot's `routing.samples[]`, in snake_case there). */
export interface RoutingSample {
  /** Sequence number, from 1, one more per sample. */
  seq: number;
  /** When it was taken (clock ms). */
  at: number;
  /** Inference requests routed per second over the last interval. */
  requestsPerSec: number;
  /** Requests that failed for good per second. */
  errorsPerSec: number;
  /** Policy decisions per second by `policy:branch` (e.g. `cache_aware:hit`). */
  branchesPerSec: Record<string, number>;
  /** Time to first token over the window, p50 and p99 in ms (streams only); null: none. */
  ttftP50Ms: number | null;
  /** See `ttftP50Ms`. */
  ttftP99Ms: number | null;
  /** Routed request time (streams: to the head) over the window, p50 and p99 in ms. */
  latencyP50Ms: number | null;
  /** See `latencyP50Ms`. */
  latencyP99Ms: number | null;
  /** Checked cache predictions per second over the window. */
  predictionsPerSec: number;
  /** Mean of reported minus predicted cached share over the window; null: none checked. */
  predictionErrorMean: number | null;
  /** Share of the window's predictions within ±0.1 of the reported share; null: none. */
  predictionWithin10: number | null;
  /** Mesh replication lag over the window (write to its peer's ack), p50 and p99 in ms. */
  meshLagP50Ms: number | null;
  /** See `meshLagP50Ms`. */
  meshLagP99Ms: number | null;
}

/** What a `RoutingHistory` reads and how often. */
export interface HistoryOptions {
  /** The gateway's metrics. */
  metrics: Metrics;
  /** The gateway's clock: samples are taken on its timers. */
  clock: Clock;
  /** The series of the mesh's replication-lag histogram, or null without a mesh (default). */
  meshLag?: () => Iterable<{ readonly s: HistogramSeries }> | null;
  /** Milliseconds between samples (default 1000). */
  intervalMs?: number;
  /** Samples kept (default 300: five minutes at 1 s). */
  keep?: number;
  /** Readings the quantiles and prediction figures span (default 10). */
  windowSamples?: number;
}

/** The cumulative values one sample is the difference of. */
interface Reading {
  at: number;
  requests: number;
  errors: number;
  branches: Map<string, number>;
  ttft: HistogramReading;
  latency: HistogramReading;
  prediction: HistogramReading;
  lag: { bounds: readonly number[]; r: HistogramReading } | null;
}

const sum = (c: FastCounter): number => {
  let n = 0;
  for (const { s } of c.entries()) n += s.value;
  return n;
};

/** A reading of no observations, shaped as `r`. */
const nothingIn = (r: HistogramReading): HistogramReading => ({
  counts: r.counts.map(() => 0),
  sum: 0,
  count: 0,
});

const ms = (seconds: number | null): number | null =>
  seconds === null ? null : Math.round(seconds * 10_000) / 10;

/** Samples the gateway's routing metrics on a timer and keeps the last few minutes. */
export class RoutingHistory {
  /** Milliseconds between samples. */
  readonly intervalMs: number;
  readonly #o: HistoryOptions;
  readonly #keep: number;
  readonly #window: number;
  readonly #samples: RoutingSample[] = [];
  readonly #readings: Reading[] = [];
  #seq = 0;

  /** Reads `o.metrics`; nothing is sampled until `run` or `sample`. */
  constructor(o: HistoryOptions) {
    this.#o = o;
    this.intervalMs = o.intervalMs ?? 1000;
    this.#keep = o.keep ?? 300;
    this.#window = o.windowSamples ?? 10;
  }

  /** Samples every `intervalMs` until `signal` aborts (the first reading at once). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.sample();
      await pause(this.#o.clock, this.intervalMs, signal).done;
    }
  }

  /** Takes one reading; from the second on, it adds a sample. */
  sample(): void {
    const r = this.#read();
    const prev = this.#readings.at(-1);
    const oldest = this.#readings[0];
    this.#readings.push(r);
    if (this.#readings.length > this.#window) this.#readings.shift();
    if (!prev) return;
    const secs = Math.max(1e-3, (r.at - prev.at) / 1000);
    const rate = (now: number, before: number) => Math.max(0, now - before) / secs;
    const branchesPerSec: Record<string, number> = {};
    for (const [k, v] of r.branches) branchesPerSec[k] = rate(v, prev.branches.get(k) ?? 0);
    const span = Math.max(1e-3, (r.at - oldest.at) / 1000);
    const ttft = windowBetween(r.ttft, oldest.ttft);
    const latency = windowBetween(r.latency, oldest.latency);
    const pred = windowBetween(r.prediction, oldest.prediction);
    // The lag's series appears with its first observation: before it, nothing was observed.
    const lag = r.lag ? windowBetween(r.lag.r, oldest.lag?.r ?? nothingIn(r.lag.r)) : null;
    const lagBounds = r.lag?.bounds ?? [];
    this.#samples.push({
      seq: ++this.#seq,
      at: r.at,
      requestsPerSec: rate(r.requests, prev.requests),
      errorsPerSec: rate(r.errors, prev.errors),
      branchesPerSec,
      ttftP50Ms: ttft && ms(quantile(DURATION_BUCKETS, ttft, 0.5)),
      ttftP99Ms: ttft && ms(quantile(DURATION_BUCKETS, ttft, 0.99)),
      latencyP50Ms: latency && ms(quantile(DURATION_BUCKETS, latency, 0.5)),
      latencyP99Ms: latency && ms(quantile(DURATION_BUCKETS, latency, 0.99)),
      predictionsPerSec: pred ? pred.count / span : 0,
      predictionErrorMean: pred && mean(pred),
      predictionWithin10: pred && shareWithin(PREDICTION_ERROR_BUCKETS, pred, -0.1, 0.1),
      meshLagP50Ms: lag && ms(quantile(lagBounds, lag, 0.5)),
      meshLagP99Ms: lag && ms(quantile(lagBounds, lag, 0.99)),
    });
    if (this.#samples.length > this.#keep) this.#samples.shift();
  }

  /** The kept samples numbered above `seq` (every kept one for 0), oldest first. */
  since(seq: number): RoutingSample[] {
    const s = this.#samples;
    if (s.length === 0 || seq >= s[s.length - 1].seq) return [];
    const first = Math.max(0, seq - s[0].seq + 1);
    return s.slice(first);
  }

  /** The number of the newest sample (0 before the first). */
  get seq(): number {
    return this.#seq;
  }

  #read(): Reading {
    const m = this.#o.metrics;
    const branches = new Map<string, number>();
    for (const { labels, s } of m.policyDecisions.entries()) {
      const k = `${labels.policy}:${labels.branch}`;
      branches.set(k, (branches.get(k) ?? 0) + s.value);
    }
    const lagSeries = [...this.#o.meshLag?.() ?? []];
    const lagBounds = lagSeries[0]?.s.bounds;
    return {
      at: this.#o.clock.now(),
      requests: sum(m.routerRequests),
      errors: sum(m.routerErrors),
      branches,
      ttft: readHistograms(DURATION_BUCKETS, m.ttft.entries()),
      latency: readHistograms(DURATION_BUCKETS, m.routerDuration.entries()),
      prediction: readHistograms(PREDICTION_ERROR_BUCKETS, m.cachePredictionError.entries()),
      lag: lagBounds ? { bounds: lagBounds, r: readHistograms(lagBounds, lagSeries) } : null,
    };
  }
}
