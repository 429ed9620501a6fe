import assert from "node:assert/strict";
import type { RetryConfig } from "../../lib/config/config.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import { seededRandom } from "../../lib/core/clock.ts";
import { backoffMs, maxAttempts } from "../../lib/proxy/retry.ts";

const CFG: RetryConfig = {
  maxAttempts: 5,
  initialBackoffMs: 100,
  maxBackoffMs: 1000,
  multiplier: 2,
  jitter: 0,
  disabled: false,
};

Deno.test("backoffMs: without jitter grows by the multiplier and stops at the cap", () => {
  const delays = [0, 1, 2, 3, 4, 5, 10].map((k) => backoffMs(k, CFG, () => 0.5));
  assert.deepEqual(delays, [100, 200, 400, 800, 1000, 1000, 1000]);
});

Deno.test("backoffMs: a fractional multiplier as SMG's default 1.5", () => {
  const cfg = { ...CFG, initialBackoffMs: 50, multiplier: 1.5, maxBackoffMs: 30000 };
  assert.deepEqual([0, 1, 2].map((k) => backoffMs(k, cfg, () => 0)), [50, 75, 112.5]);
});

Deno.test("backoffMs: jitter stays within [1 - j, 1 + j] of the base, cap included", () => {
  const cfg = { ...CFG, jitter: 0.2 };
  const random = seededRandom(7);
  for (let k = 0; k < 8; k++) {
    const base = Math.min(100 * 2 ** k, 1000);
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < 500; i++) {
      const d = backoffMs(k, cfg, random);
      lo = Math.min(lo, d);
      hi = Math.max(hi, d);
    }
    assert.ok(lo >= base * 0.8 && hi <= base * 1.2, `k=${k}: [${lo}, ${hi}] vs base ${base}`);
    // The jitter is used: the spread covers most of the allowed band.
    assert.ok(hi - lo > base * 0.3, `k=${k}: spread ${hi - lo} too narrow`);
  }
});

Deno.test("backoffMs: the random draw maps to the edges of the jitter band", () => {
  const cfg = { ...CFG, jitter: 0.5 };
  assert.equal(backoffMs(0, cfg, () => 0), 50);
  assert.equal(backoffMs(0, cfg, () => 0.5), 100);
  assert.ok(Math.abs(backoffMs(0, cfg, () => 0.999999) - 150) < 1e-3);
});

Deno.test("backoffMs: full jitter never goes negative", () => {
  const cfg = { ...CFG, jitter: 1 };
  const random = seededRandom(1);
  for (let i = 0; i < 200; i++) assert.ok(backoffMs(1, cfg, random) >= 0);
});

Deno.test("backoffMs: the same seed gives the same delays", () => {
  const cfg = { ...CFG, jitter: 0.2 };
  const a = seededRandom(42);
  const b = seededRandom(42);
  const da = [0, 1, 2, 3].map((k) => backoffMs(k, cfg, a));
  const db = [0, 1, 2, 3].map((k) => backoffMs(k, cfg, b));
  assert.deepEqual(da, db);
});

Deno.test("maxAttempts: the configured total, or 1 when retries are disabled", () => {
  assert.equal(maxAttempts(CFG), 5);
  assert.equal(maxAttempts({ ...CFG, maxAttempts: 1 }), 1);
  assert.equal(maxAttempts({ ...CFG, disabled: true }), 1);
  assert.equal(maxAttempts(defaultConfig().retry), 5);
});
