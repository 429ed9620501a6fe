/** The one token bucket's arithmetic, under fake time: refill, cap, debt, backwards clock, waits. */

import assert from "node:assert/strict";
import { TokenBucket } from "../../lib/core/token_bucket.ts";

/** One step against a bucket: an operation at a time (ms) and what it should answer. */
type Step =
  | ["take", number, number, boolean]
  | ["charge", number, number]
  | ["refund", number, number]
  | ["level", number, number]
  | ["wait", number, number, number];

function run(b: TokenBucket, steps: Step[], name: string): void {
  steps.forEach((s, i) => {
    const where = `${name}, step ${i} ${JSON.stringify(s)}`;
    switch (s[0]) {
      case "take":
        assert.equal(b.take(s[1], s[2]), s[3], where);
        break;
      case "charge":
        b.charge(s[1], s[2]);
        break;
      case "refund":
        b.refund(s[1], s[2]);
        break;
      case "level":
        assert.equal(b.level(s[1]), s[2], where);
        break;
      case "wait":
        assert.equal(b.waitMs(s[1], s[2]), s[3], where);
        break;
    }
  });
}

Deno.test("token bucket: refill, cap, debt, refund, backwards clock, waits", () => {
  // [name, capacity, rate per second, start (ms), steps]
  const table: [string, number, number, number, Step[]][] = [
    ["starts full", 3, 1, 0, [["level", 0, 3], ["take", 3, 0, true], ["level", 0, 0]]],
    ["take refuses what is not there and takes nothing", 3, 1, 0, [
      ["take", 2, 0, true],
      ["take", 2, 0, false],
      ["level", 0, 1],
    ]],
    ["refills continuously at the rate", 10, 4, 0, [
      ["charge", 10, 0],
      ["level", 250, 1],
      ["level", 1000, 4],
      ["take", 4, 1000, true],
      ["take", 1, 1249, false],
      ["take", 1, 1250, true],
    ]],
    ["never refills above the capacity, however long the pause", 2, 1000, 0, [
      ["take", 2, 0, true],
      ["level", 60_000, 2],
      ["take", 1, 60_000, true],
      ["take", 1, 60_000, true],
      ["take", 1, 60_000, false],
    ]],
    ["charge allows debt, which the refill repays first", 60, 1, 0, [
      ["charge", 100, 0],
      ["level", 0, -40],
      ["wait", 10, 0, 50_000],
      ["take", 10, 49_999, false],
      ["take", 10, 50_000, true],
    ]],
    ["a negative charge refunds", 60, 1, 0, [["charge", 50, 0], ["charge", -20, 0], [
      "level",
      0,
      30,
    ]]],
    ["refund is capped at the capacity", 600, 10, 0, [
      ["charge", 500, 0],
      ["refund", 480, 0],
      ["level", 0, 580],
      ["refund", 480, 0],
      ["level", 0, 600],
    ]],
    ["a clock stepping backwards adds nothing, and no span counts twice", 1, 1, 5000, [
      ["take", 1, 5000, true],
      ["take", 1, 0, false],
      ["take", 1, 999, false],
      ["level", 1000, 0],
      ["level", 5500, 0.5],
      ["take", 1, 6000, true],
    ]],
    ["an Infinity rate never refuses, even with no capacity", 0, Infinity, 0, [
      ["take", 1, 0, true],
      ["take", 1, 0, true],
      ["charge", 100, 0],
      ["take", 1_000_000, 0, true],
      ["level", 0, Infinity],
      ["wait", 5, 0, 0],
    ]],
    ["a rate of 0 only refunds fill", 2, 0, 0, [
      ["take", 2, 0, true],
      ["level", 3_600_000, 0],
      ["wait", 1, 3_600_000, Infinity],
      ["refund", 1, 3_600_000],
      ["take", 1, 3_600_000, true],
    ]],
    ["wait: 0 when held, the refill time when short, Infinity above the capacity", 60, 10, 0, [
      ["wait", 60, 0, 0],
      ["take", 50, 0, true],
      ["wait", 10, 0, 0],
      ["wait", 30, 0, 2000],
      ["wait", 30, 1500, 500],
      ["wait", 61, 1500, Infinity],
    ]],
  ];
  for (const [name, capacity, rate, start, steps] of table) {
    run(new TokenBucket(capacity, rate, start), steps, name);
  }
});
