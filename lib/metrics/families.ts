/**
 * How the gateway's metric families are declared: the histogram bucket boundaries, and
 * `familyBuilder`, which registers counters, gauges and histograms (`fast.ts`) in one
 * prom-client registry. In: a registry; out: families that render in registration order.
 */

import type client from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "./fast.ts";

/** SMG's default duration buckets, 1 ms to 2 h. */
export const DURATION_BUCKETS = [
  0.001,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
  300,
  600,
  1800,
  3600,
  7200,
];

/** Buckets for per-token times (1 ms to 2 s). */
export const TOKEN_BUCKETS = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.02,
  0.035,
  0.05,
  0.075,
  0.1,
  0.15,
  0.25,
  0.5,
  1,
  2,
];

/** Buckets of a difference of two shares in [-1, 1]. */
export const PREDICTION_ERROR_BUCKETS = [
  -0.9,
  -0.5,
  -0.25,
  -0.1,
  -0.05,
  -0.01,
  0.01,
  0.05,
  0.1,
  0.25,
  0.5,
  0.9,
];

/** Buckets of a share in [0, 1] (a matched prefix). */
export const RATIO_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1];

/** Registers metric families in one registry. */
export interface FamilyBuilder {
  /** A counter. */
  counter(name: string, help: string, labelNames: string[]): FastCounter;
  /** A gauge (no labels by default). */
  gauge(name: string, help: string, labelNames?: string[]): FastGauge;
  /** A histogram (SMG's duration buckets by default). */
  hist(name: string, help: string, labelNames: string[], buckets?: number[]): FastHistogram;
}

/** Builds families in `r`. */
export function familyBuilder(r: client.Registry): FamilyBuilder {
  return {
    counter: (name, help, labelNames) => new FastCounter(r, name, help, labelNames),
    gauge: (name, help, labelNames = []) => new FastGauge(r, name, help, labelNames),
    hist: (name, help, labelNames, buckets = DURATION_BUCKETS) =>
      new FastHistogram(r, name, help, labelNames, buckets),
  };
}
