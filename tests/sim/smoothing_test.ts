/** The smoothed load figures: EWMA arithmetic and a rate meter that reads a steady rate and decays. */

import assert from "node:assert/strict";
import { ewma, RateMeter } from "../../lib/sim/smoothing.ts";

Deno.test("ewma: starts at the first sample, then moves by alpha", () => {
  assert.equal(ewma(null, 0.4, 0.1), 0.4);
  assert.ok(Math.abs(ewma(0.4, 1, 0.1) - 0.46) < 1e-12);
});

Deno.test("RateMeter: reads zero, converges on a steady rate, decays when events stop", () => {
  const m = new RateMeter(1000);
  assert.equal(m.value(0), 0);
  for (let t = 10; t <= 10_000; t += 10) m.add(2, t); // 200 per second
  assert.ok(Math.abs(m.value(10_000) - 200) < 10, String(m.value(10_000)));
  assert.ok(m.value(11_000) < 80 && m.value(11_000) > 70, "e^-1 of it a second later");
  assert.ok(m.value(30_000) < 0.001);
  assert.equal(m.value(5_000), m.value(10_000), "no growth when read in the past");
  assert.equal(m.last(), m.value(10_000), "last(): the rate at the last event, held");
  m.add(2, 20_000); // after a 10 s gap the next event reads low
  assert.ok(m.last() < 3, String(m.last()));
  assert.equal(new RateMeter().last(), 0);
});
