/**
 * Histogram windows: merging series, the difference of two readings (null across a reset), and
 * quantiles interpolated inside buckets as Prometheus's `histogram_quantile`, means and shares.
 */

import assert from "node:assert/strict";
import { HistogramSeries } from "../../lib/metrics/fast.ts";
import {
  type HistogramReading,
  mean,
  quantile,
  readHistograms,
  shareWithin,
  windowBetween,
} from "../../lib/dashboard/quantiles.ts";

const BOUNDS = [1, 2, 4];
const reading = (counts: number[], sum = 0): HistogramReading => ({
  counts,
  sum,
  count: counts.reduce((a, b) => a + b, 0),
});

Deno.test("readHistograms: sums every series of the same bounds, skips others", () => {
  const a = new HistogramSeries(BOUNDS);
  const b = new HistogramSeries(BOUNDS);
  const other = new HistogramSeries([1]);
  a.observe(0.5);
  b.observe(3);
  b.observe(9);
  other.observe(0.1);
  const r = readHistograms(BOUNDS, [a, b, other].map((s) => ({ s })));
  assert.deepEqual(r, { counts: [1, 0, 1, 1], sum: 12.5, count: 3 });
});

Deno.test("windowBetween: the observations in between; null when a count went down", () => {
  const w = windowBetween(reading([3, 2, 1, 0], 9), reading([1, 2, 0, 0], 4));
  assert.deepEqual(w, { counts: [2, 0, 1, 0], sum: 5, count: 3 });
  assert.equal(windowBetween(reading([0, 0, 0, 0]), reading([1, 0, 0, 0])), null);
  assert.equal(windowBetween(reading([2, 0, 0, 0]), reading([1, 1, 0, 0])), null);
});

const table: [string, number[], number, number | null][] = [
  ["empty window", [0, 0, 0, 0], 0.5, null],
  ["first bucket interpolates from 0", [4, 0, 0, 0], 0.5, 0.5],
  ["middle bucket from its lower bound", [0, 0, 2, 0], 0.5, 3],
  ["the rank falls in the second of two buckets", [1, 1, 0, 0], 0.99, 1.98],
  ["+Inf bucket answers the last bound", [0, 0, 0, 5], 0.5, 4],
  ["p99 of a mostly fast window lands in the slow tail", [99, 0, 1, 0], 0.995, 3],
];
for (const [name, counts, q, want] of table) {
  Deno.test(`quantile: ${name}`, () => {
    const got = quantile(BOUNDS, reading(counts), q);
    if (want === null) assert.equal(got, null);
    else assert.ok(Math.abs(got! - want) < 1e-9, `${got} ≠ ${want}`);
  });
}

Deno.test("quantile: negative bounds interpolate from the bucket below", () => {
  const b = [-0.5, -0.1, 0.1, 0.5];
  assert.ok(Math.abs(quantile(b, reading([0, 0, 2, 0, 0]), 0.5)! - 0) < 1e-9);
  assert.equal(quantile(b, reading([2, 0, 0, 0, 0]), 0.5), -0.5);
});

Deno.test("mean and shareWithin", () => {
  const b = [-0.5, -0.1, 0.1, 0.5];
  const w = reading([1, 1, 6, 2, 0], 0.8);
  assert.equal(mean(w), 0.08);
  assert.equal(mean(reading([0, 0, 0, 0, 0])), null);
  assert.equal(shareWithin(b, w, -0.1, 0.1), 0.6);
  assert.equal(shareWithin(b, w, -0.5, 0.5), 0.9);
  assert.equal(shareWithin(b, reading([0, 0, 0, 0, 0]), -0.1, 0.1), null);
});
