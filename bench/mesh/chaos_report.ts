/**
 * Turns the chaos bench's results into markdown: one table per experiment, the goals beside
 * the figures (first SUSPECTED ≤ 2 s and DOWN everywhere ≤ 6 s at p99 for N = 5; idle mesh
 * traffic under 2 KB/s per router), and every DOWN seen during a soak listed by time.
 */

import type { DetectResult } from "./chaos_detect.ts";
import type { IdleResult } from "./chaos_idle.ts";
import type { SoakResult } from "./chaos_soak.ts";
import type { Summary } from "./chaos_stats.ts";

/** Everything one run measured. */
export interface ChaosResults {
  /** Command line. */
  command: string;
  /** Machine and build. */
  machine: Record<string, string>;
  /** Start time (ISO). */
  started: string;
  /** Where the router logs are. */
  logDir: string;
  /** Poll period of the detection runs, ms. */
  detectPollMs: number;
  /** Detection, per size. */
  detect?: DetectResult[];
  /** The loss soak. */
  loss?: SoakResult;
  /** The pause soak. */
  pause?: SoakResult;
  /** Idle traffic. */
  idle?: IdleResult;
  /** Experiments that failed, with why. */
  errors: Record<string, string>;
}

/** Goals to compare with. */
export const GOALS = { suspectP99Ms: 2000, downP99Ms: 6000, idleBytesPerSec: 2000 };

const ms = (x: number | null) => (x === null ? "–" : (x / 1000).toFixed(2));
const bps = (x: number) => x.toFixed(0);

function summaryCells(s: Summary): string {
  return `${ms(s.median)} | ${ms(s.p99)} | ${ms(s.max)}`;
}

function detectTable(r: ChaosResults): string[] {
  if (!r.detect?.length) return [];
  const rows = r.detect.map((d) => {
    const fails = d.suspect.failed + d.down.failed;
    return `| ${d.n} | ${d.samples.length}${fails ? ` (${fails} timed out)` : ""} | ` +
      `${summaryCells(d.suspect)} | ${summaryCells(d.down)} | ${ms(d.rejoin.median)} | ` +
      `${ms(d.rejoin.max)} |`;
  });
  const five = r.detect.find((d) => d.n === 5);
  const verdict = five
    ? `At N = 5, p99 first SUSPECTED ${ms(five.suspect.p99)} s (goal ≤ ${
      GOALS.suspectP99Ms / 1000
    } s: ${(five.suspect.p99 ?? Infinity) <= GOALS.suspectP99Ms ? "met" : "missed"}), ` +
      `p99 DOWN everywhere ${ms(five.down.p99)} s (goal ≤ ${GOALS.downP99Ms / 1000} s: ${
        (five.down.p99 ?? Infinity) <= GOALS.downP99Ms ? "met" : "missed"
      }).`
    : "";
  return [
    "### Detection after SIGKILL",
    "",
    `Seconds from the SIGKILL; polled every ${r.detectPollMs} ms, so each figure is late by at ` +
    "most one poll. p99 is by nearest rank: with fewer than 100 kills it is the maximum.",
    "",
    "| N | kills | first SUSPECTED median | p99 | max | DOWN everywhere median | p99 | max | " +
    "rejoin median | rejoin max |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows,
    "",
    ...(verdict ? [verdict, ""] : []),
    ...r.detect.flatMap((d) => {
      const gaps = d.samples.filter((s) => s.unsettled > 0);
      return gaps.length
        ? [
          `N = ${d.n}: in ${gaps.length} of ${d.samples.length} gaps between a re-formed mesh ` +
          `and the next kill some router answered a live member non-ALIVE (${
            gaps.map((s) => s.firstUnsettled).slice(0, 3).join("; ")
          }).`,
          "",
        ]
        : [];
    }),
    ...r.detect.filter((d) => d.error).map((d) => `N = ${d.n} stopped early: ${d.error}`),
  ];
}

function soakRow(name: string, s: SoakResult): string {
  const failed = s.perRouter.reduce((a, x) => a + x.probesFailed, 0);
  const probes = s.perRouter.reduce((a, x) => a + x.probes, 0);
  const loss = s.loss ? `${(s.loss.applied * 100).toFixed(2)} % (${s.loss.method})` : "0";
  return `| ${name} | ${s.secs.toFixed(0)} | ${s.polls} | **${s.downObservations}** | ` +
    `${s.downTransitions.length} | ${s.suspectedObservations} | ${s.suspicions} | ` +
    `${s.refutations} | ${failed} / ${probes} | ${loss} |`;
}

function soakTable(r: ChaosResults): string[] {
  const soaks: [string, SoakResult][] = [];
  if (r.loss) soaks.push([`${r.loss.loss?.pct ?? "?"} % loss, N = ${r.loss.n}`, r.loss]);
  if (r.pause) {
    soaks.push([`SIGSTOP 2 s every 10 s (${r.pause.pauses} pauses), N = ${r.pause.n}`, r.pause]);
  }
  if (!soaks.length) return [];
  const downs = soaks.flatMap(([name, s]) =>
    s.downTransitions.map((t) =>
      `- ${name}: ${t.t} ${t.observer} saw ${t.member} ${t.from} → DOWN (#${t.incarnation})`
    )
  );
  return [
    "### False DOWN soaks",
    "",
    "Every router's /mesh/status polled once a second from inside its namespace; a DOWN " +
    "observation is one answer listing one member DOWN. Suspicions, refutations and probes " +
    "are metric deltas summed over the routers.",
    "",
    "| soak | s | answers | DOWN observations | changes to DOWN | SUSPECTED observations | " +
    "suspicions | refutations | failed probes / probes | loss applied |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...soaks.map(([name, s]) => soakRow(name, s)),
    "",
    ...(downs.length ? ["DOWN seen:", "", ...downs.slice(0, 50), ""] : []),
  ];
}

function idleTable(r: ChaosResults): string[] {
  const i = r.idle;
  if (!i) return [];
  return [
    "### Idle mesh traffic",
    "",
    `Bytes/s on each router's veth over ${i.secs.toFixed(0)} s with nothing else running ` +
    `(no polling during the window; mesh whole afterwards: ${i.wholeAfter ? "yes" : "NO"}).`,
    "",
    "| router | tx B/s | rx B/s | tx+rx B/s |",
    "| --- | ---: | ---: | ---: |",
    ...i.routers.map((x) => `| ${x.name} | ${bps(x.tx)} | ${bps(x.rx)} | ${bps(x.total)} |`),
    `| median | ${bps(i.tx.median)} | ${bps(i.rx.median)} | ${bps(i.total.median)} |`,
    `| max | ${bps(i.tx.max)} | ${bps(i.rx.max)} | ${bps(i.total.max)} |`,
    "",
    `Goal: under ${GOALS.idleBytesPerSec} B/s per router (tx+rx): ${
      i.total.max < GOALS.idleBytesPerSec ? "met" : "missed"
    } (max ${bps(i.total.max)} B/s).`,
    "",
  ];
}

/** The markdown summary of a run. */
export function markdown(r: ChaosResults): string {
  const machine = Object.entries(r.machine).map(([k, v]) => `${k} ${v}`).join(", ");
  return [
    "## HA mesh chaos",
    "",
    `\`${r.command}\` — ${r.started}; ${machine}. Router logs: ${r.logDir}.`,
    "",
    ...detectTable(r),
    ...soakTable(r),
    ...idleTable(r),
    ...Object.entries(r.errors).map(([k, v]) => `**${k} failed:** ${v}`),
  ].join("\n");
}
