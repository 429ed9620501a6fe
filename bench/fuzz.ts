/**
 * The fuzzers' long run: each family of `support/fuzz/` (raw HTTP/1.1 framing, JSON bodies
 * on the inference routes, the worker API, the mesh port) fed `--inputs` seeded inputs against
 * an in-process gateway, with the same oracles as the bounded run in the test suite. Printed per
 * family: inputs, wall time, the outcome histogram (statuses, closes) and every violation with
 * the input that caused it; `--only` replays single inputs of one family. Exits 1 on a
 * violation. Traffic goes to 127.0.0.1 only.
 *
 *   deno task bench:fuzz [--seed 1] [--inputs 25000] [--families http,json,workers,mesh]
 *                        [--only 17,408]
 */

import { parseArgs } from "node:util";
import { formatReport, runFamily } from "../support/fuzz/driver.ts";
import { FAMILIES } from "../support/fuzz/families.ts";
import { taskArgs } from "./task_args.ts";

const { values: v } = parseArgs({
  args: taskArgs(),
  options: {
    seed: { type: "string", default: "1" },
    inputs: { type: "string", default: "25000" },
    families: { type: "string", default: FAMILIES.map((f) => f.name).join(",") },
    only: { type: "string" },
  },
});

const seed = Number(v.seed);
const inputs = Number(v.inputs);
if (!Number.isInteger(seed) || !Number.isInteger(inputs) || inputs < 1) {
  console.error("--seed and --inputs take integers (--inputs at least 1)");
  Deno.exit(2);
}
const names = v.families.split(",").map((s) => s.trim()).filter((s) => s !== "");
const unknown = names.filter((n) => !FAMILIES.some((f) => f.name === n));
if (unknown.length > 0) {
  console.error(`unknown families: ${unknown.join(", ")} (known: ${FAMILIES.map((f) => f.name)})`);
  Deno.exit(2);
}
const only = v.only?.split(",").map(Number);

let failed = false;
let total = 0;
const started = performance.now();
for (const family of FAMILIES.filter((f) => names.includes(f.name))) {
  const report = await runFamily(family, { seed, inputs, only });
  total += report.inputs;
  failed ||= report.violations.length > 0;
  console.log(formatReport(report));
}
console.log(`total: ${total} inputs in ${((performance.now() - started) / 1000).toFixed(1)} s`);
Deno.exit(failed ? 1 : 0);
