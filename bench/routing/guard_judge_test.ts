/**
 * The routing guard's verdicts: figures read from a run's rows, a baseline's mean and noise over
 * repeated runs, and "worse" only beyond twice the noise and the figure's floor, in the figure's
 * own bad direction.
 */

import assert from "node:assert/strict";
import { baselineOf, cellFigures, judge } from "./guard_judge.ts";
import type { Summary } from "./summary.ts";

const row = (target: string, over: Partial<Summary>): Summary =>
  ({
    target,
    failed: 0,
    ttftMeanMs: null,
    ttftP99Ms: null,
    cacheHitRate: null,
    ...over,
  }) as Summary;

Deno.test("guard: a run's figures are cache_aware's, its TTFT over round robin's", () => {
  const f = cellFigures([
    row("smg:round_robin", { ttftMeanMs: 1000, ttftP99Ms: 4000, failed: 1 }),
    row("smg:cache_aware", {
      ttftMeanMs: 600,
      ttftP99Ms: 3000,
      cacheHitRate: 0.08,
      prediction: { checked: 10, meanError: 0, within5: 0.9, within25: 1, ratio: 1.1 },
    }),
  ]);
  assert.equal(f.ttftMeanVsRr, 0.6);
  assert.equal(f.ttftP99VsRr, 0.75);
  assert.equal(f.hit, 0.08);
  assert.equal(f.within5, 0.9);
  assert.ok(Math.abs(f.ratioError! - 0.1) < 1e-9);
  assert.equal(f.failed, 1);
});

Deno.test("guard: a mesh cell judges the meshed routers against one router, follow-ups included", () => {
  const t = { judged: "smg:cache_aware#3-mesh", reference: "smg:cache_aware" };
  const rows = [
    row("smg:cache_aware", { ttftMeanMs: 140, ttftP99Ms: 500, followUpHitRate: 0.8 }),
    row("smg:cache_aware#3-mesh", {
      ttftMeanMs: 147,
      ttftP99Ms: 550,
      cacheHitRate: 0.68,
      followUpHitRate: 0.76,
    }),
  ];
  const f = cellFigures(rows, t);
  assert.ok(Math.abs(f.ttftMeanVsRr! - 1.05) < 1e-9);
  assert.ok(Math.abs(f.ttftP99VsRr! - 1.1) < 1e-9);
  assert.ok(Math.abs(f.followUpVsRef! - 0.95) < 1e-9);
  assert.equal(f.hit, 0.68);
  assert.equal(cellFigures(rows).followUpVsRef, null, "not judged against round robin");
});

Deno.test("guard: worse only beyond twice the noise and the floor, the bad way", () => {
  const base = baselineOf([
    { ttftMeanVsRr: 0.6, hit: 0.1, failed: 0 },
    { ttftMeanVsRr: 0.7, hit: 0.1, failed: 0 },
  ]);
  const b = base.ttftMeanVsRr!;
  assert.ok(Math.abs(b.mean - 0.65) < 1e-9 && Math.abs(b.noise - 0.05) < 1e-9);
  assert.deepEqual(b.runs, [0.6, 0.7]);
  const verdicts = (now: Record<string, number>) =>
    Object.fromEntries(judge(base, now).map((v) => [v.figure, v.verdict]));
  // Tolerance on the ratio: max(0.06, 2 × 0.05) = 0.1.
  assert.deepEqual(verdicts({ ttftMeanVsRr: 0.74, hit: 0.1, failed: 0 }), {
    ttftMeanVsRr: "same",
    hit: "same",
    failed: "same",
  });
  assert.deepEqual(verdicts({ ttftMeanVsRr: 0.8, hit: 0.085, failed: 1 }), {
    ttftMeanVsRr: "worse",
    hit: "worse",
    failed: "worse",
  });
  assert.deepEqual(verdicts({ ttftMeanVsRr: 0.5, hit: 0.12, failed: 0 }), {
    ttftMeanVsRr: "better",
    hit: "better",
    failed: "same",
  });
});
