/**
 * The hot path bench's requests (`hot_path_bench.ts`) in timed batches: a warm-up, then 30
 * batches of 5,000 requests, each batch's time per request; prints the best and the median
 * batch. On a noisy machine the best batch separates two builds where `deno bench`'s means do
 * not: run it on each build in turn, pinned to one CPU, a few times.
 *
 *   taskset -c 1 deno run --allow-all --unstable-no-legacy-abort bench/hot_path_loop.ts \
 *     [entry|entry-limits|entry-trace|entry-trace10|handle]
 */

import {
  entryLimitedOnce,
  entryOnce,
  entryTraced10Once,
  entryTracedOnce,
  handleOnce,
} from "./hot_path_bench.ts";

const WARMUP = 20_000;
const BATCHES = 30;
const PER_BATCH = 5_000;

const which = Deno.args[0] ?? "entry";
const CASES: Record<string, () => Promise<void>> = {
  entry: () => entryOnce(),
  "entry-limits": entryLimitedOnce,
  "entry-trace": entryTracedOnce,
  "entry-trace10": entryTraced10Once,
  handle: handleOnce,
};
const once = CASES[which];
if (!once) {
  console.error(`usage: hot_path_loop.ts [${Object.keys(CASES).join("|")}]`);
  Deno.exit(2);
}
for (let i = 0; i < WARMUP; i++) await once();
const us: number[] = [];
for (let b = 0; b < BATCHES; b++) {
  const t0 = performance.now();
  for (let i = 0; i < PER_BATCH; i++) await once();
  us.push(((performance.now() - t0) / PER_BATCH) * 1000);
}
us.sort((a, b) => a - b);
const f = (v: number) => v.toFixed(2);
console.log(
  `${which}: best batch ${f(us[0])} µs/request, median ${f(us[BATCHES >> 1])} µs/request`,
);
Deno.exit(0);
