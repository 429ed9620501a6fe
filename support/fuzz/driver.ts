/**
 * The one driver every fuzz family runs under (`tests/fuzz/`, `bench/fuzz.ts`): a family starts
 * a target (a gateway and whatever fakes it needs), the driver feeds it `inputs` inputs, at most
 * `concurrency` at once, each drawn from its own generator seeded by (seed, family, index), so
 * any input can be replayed alone (`only`). In: the family and the run's seed and size. Out: a
 * report with the inputs run, a histogram of outcomes (statuses, closes) and every oracle
 * violation with the input that caused it. The target's `finish` runs the checks that need the
 * whole run (nothing forwarded that was not answered, state unchanged), after its inputs and
 * before it closes.
 */

import { type Random, seededRandom } from "../../lib/core/clock.ts";

/** What one input came to. */
export interface Outcome {
  /** Outcome labels counted in the histogram (statuses of answers, "closed", ...). */
  labels: string[];
  /** Oracle violations this input caused (empty: none). */
  violations: string[];
  /** A short description of the input, quoted with its violations. */
  input: string;
}

/** A running fuzz target. */
export interface FuzzTarget {
  /** Runs input `index`, drawn from `random`. Must settle within a bound of its own. */
  run(index: number, random: Random): Promise<Outcome>;
  /** Checks over the whole run (after every input settled); violations found. */
  finish(): Promise<string[]>;
  /** Stops everything the target started. */
  close(): Promise<void>;
}

/** A fuzz family: a name, how many inputs at once, and how to start its target. */
export interface FuzzFamily {
  /** Name used by `--families` and in reports. */
  readonly name: string;
  /** Inputs in flight at once (default 1). */
  readonly concurrency?: number;
  /** Starts the target; `seed` seeds whatever the target draws itself. */
  start(seed: number): Promise<FuzzTarget>;
}

/** One oracle violation. */
export interface Violation {
  /** The input's index, or -1 for a whole-run check. */
  index: number;
  /** The input as described by the family. */
  input: string;
  /** What the oracle saw. */
  detail: string;
}

/** The result of running one family. */
export interface FuzzReport {
  family: string;
  seed: number;
  /** Inputs run. */
  inputs: number;
  /** Outcome label → count. */
  histogram: Map<string, number>;
  violations: Violation[];
  /** Wall time of the run, ms (target start and close included). */
  ms: number;
}

/** Options of `runFamily`. */
export interface RunOptions {
  /** The run's seed (default 1). */
  seed?: number;
  /** Inputs to run (default 1000). */
  inputs?: number;
  /** Runs only these input indexes (replaying a violation); default all. */
  only?: readonly number[];
  /** Stops feeding inputs after this many violations (default 20). */
  maxViolations?: number;
}

/** FNV-1a of a string, 32 bits. */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The generator of input `index` of `family` in a run seeded `seed`. */
export function inputRandom(seed: number, family: string, index: number): Random {
  const mixed = seededRandom(seed ^ fnv(family));
  const a = Math.floor(mixed() * 2 ** 32);
  return seededRandom((a ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
}

/** Runs `family` against a fresh target; the report of the run. */
export async function runFamily(family: FuzzFamily, o: RunOptions = {}): Promise<FuzzReport> {
  const seed = o.seed ?? 1;
  const indexes = o.only ?? Array.from({ length: o.inputs ?? 1000 }, (_, i) => i);
  const maxViolations = o.maxViolations ?? 20;
  const started = performance.now();
  const histogram = new Map<string, number>();
  const violations: Violation[] = [];
  let ran = 0;
  const target = await family.start(seed);
  try {
    let next = 0;
    const lane = async () => {
      while (next < indexes.length && violations.length < maxViolations) {
        const index = indexes[next++];
        const out = await target.run(index, inputRandom(seed, family.name, index));
        ran++;
        for (const l of out.labels) histogram.set(l, (histogram.get(l) ?? 0) + 1);
        for (const detail of out.violations) violations.push({ index, input: out.input, detail });
      }
    };
    await Promise.all(Array.from({ length: family.concurrency ?? 1 }, lane));
    for (const detail of await target.finish()) violations.push({ index: -1, input: "", detail });
  } finally {
    await target.close();
  }
  return {
    family: family.name,
    seed,
    inputs: ran,
    histogram,
    violations,
    ms: performance.now() - started,
  };
}

/** The report as text: a header line, the histogram sorted by label, then any violations. */
export function formatReport(r: FuzzReport): string {
  const labels = [...r.histogram.entries()].sort((a, b) => a[0].localeCompare(b[0]));
  const lines = [
    `${r.family}: ${r.inputs} inputs, seed ${r.seed}, ${(r.ms / 1000).toFixed(1)} s, ` +
    `${r.violations.length} violations`,
    `  outcomes: ${labels.map(([l, n]) => `${l}=${n}`).join(" ")}`,
  ];
  for (const v of r.violations.slice(0, 20)) {
    lines.push(
      `  VIOLATION input ${v.index}: ${v.detail}${v.input ? `\n    input: ${v.input}` : ""}`,
    );
  }
  return lines.join("\n");
}
