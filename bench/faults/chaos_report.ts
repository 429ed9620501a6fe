/**
 * The chaos benchmark's judgement and report (pure): what failed in each stream as its client saw
 * it (against the reference answer of an unbroken worker), which streams were broken (their
 * first worker faulted while they were open) and how (killed; frozen mid-stream, or before its
 * first event reached the client), the e2e durations of broken and unbroken streams,
 * the gateway's counters read from its `/metrics` text, and the markdown table of the runs.
 */

import type { StreamRecord } from "./chaos_client.ts";
import type { FaultRecord } from "./chaos_faults.ts";

/** The unbroken answer to a stream's request, read straight from a healthy worker. */
export interface Reference {
  text: string;
  /** Its usage's `completion_tokens` (null: no usage chunk). */
  completionTokens: number | null;
}

/** What a client can notice wrong with a stream. */
export type FailureKind =
  | "no response" // the request failed before a status
  | "status" // not 200
  | "error event" // an `event: error` in the stream
  | "cut" // the body broke off on the client
  | "no [DONE]" // ended without `data: [DONE]`
  | "text" // complete, but its text differs from the reference
  | "usage" // complete, but no usage or another completion_tokens than the reference
  | "ids"; // more than one id

/** What the client noticed wrong with `r` (empty: nothing), against its reference `ref`. */
export function failuresOf(r: StreamRecord, ref: Reference | undefined): FailureKind[] {
  if (r.status === 0) return ["no response"];
  if (r.status !== 200) return ["status"];
  const out: FailureKind[] = [];
  if (r.errorEvents.length > 0) out.push("error event");
  if (r.failure !== null) out.push("cut");
  if (!r.done) out.push("no [DONE]");
  // A stream cut short differs from its reference by construction: judged complete ones only.
  if (out.length === 0 && ref) {
    if (r.text !== ref.text) out.push("text");
    if (r.usage?.completion_tokens !== ref.completionTokens) out.push("usage");
  }
  if (r.ids > 1) out.push("ids");
  return out;
}

/** How a broken stream's first worker failed it. */
export type BreakKind =
  | "killed" // its worker was SIGKILLed while it was open
  | "frozen mid-stream" // its worker was frozen after its first event
  | "frozen before its first event"; // its worker was frozen before any event reached it

/** A stream's row in the table of streams by how they were broken. */
export type StreamGroup = BreakKind | "not broken";

/** Every `StreamGroup`, in table order. */
export const STREAM_GROUPS: readonly StreamGroup[] = [
  "not broken",
  "killed",
  "frozen mid-stream",
  "frozen before its first event",
];

/**
 * How `r` was broken, or null: whether its first worker (`workerUrl` maps the routed id to its
 * URL) was faulted while it was open, and how (the first such fault). A kill does not count for a
 * stream whose first event came after the worker was back: the request reached the restarted
 * worker late (retried there after a wait elsewhere), nothing of it was lost in the kill.
 */
export function breakOf(
  r: StreamRecord,
  faults: FaultRecord[],
  workerUrl: (id: string) => string | undefined,
): BreakKind | null {
  const url = r.worker === null ? undefined : workerUrl(r.worker);
  if (url === undefined) return null;
  const f = faults.find((f) =>
    f.url === url && f.startMs < r.endMs && (Number.isNaN(f.endMs) || f.endMs > r.startMs) &&
    !(f.kind === "kill" && r.firstEventMs >= f.endMs)
  );
  if (!f) return null;
  if (f.kind === "kill") return "killed";
  return r.firstEventMs < f.startMs ? "frozen mid-stream" : "frozen before its first event";
}

/** The `q` quantile (0-1, nearest rank) of `xs`; NaN when empty. */
export function percentile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil(q * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

/** The sum of counter `name`'s samples in Prometheus text `text`, by the value of `label`. */
export function counterBy(text: string, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  const re = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, "gm");
  for (const m of text.matchAll(re)) {
    const v = new RegExp(`(?:^|,)${label}="([^"]*)"`).exec(m[1])?.[1] ?? "";
    out[v] = (out[v] ?? 0) + Number(m[2]);
  }
  return out;
}

/** p50, p99 and count of some durations, ms. */
export interface Spread {
  n: number;
  p50: number;
  p99: number;
}

function spread(xs: number[]): Spread {
  return { n: xs.length, p50: percentile(xs, 0.5), p99: percentile(xs, 0.99) };
}

/** The streams of one `StreamGroup`. */
export interface GroupSummary {
  /** Streams in it. */
  n: number;
  /** Those with a client-visible failure. */
  failed: number;
  /** The e2e and the time to the first event of those without one, ms. */
  ms: Spread;
  firstEventMs: Spread;
  /** The largest silence between two events among those without one, ms. */
  maxGapMs: number;
}

/** One run's result. */
export interface RunSummary {
  /** `--stream-migration-limit` of its gateway. */
  migrationLimit: number;
  /** `--stream-idle-timeout-secs` of its gateway. */
  idleSecs: number;
  streams: number;
  /** Streams with any client-visible failure, and how many had each kind. */
  failed: number;
  failures: Partial<Record<FailureKind, number>>;
  broken: number;
  /** Broken streams with a client-visible failure. */
  brokenFailed: number;
  /** Broken streams that ended complete ([DONE], no error) with a text other than the reference. */
  brokenMismatch: number;
  /** `smg_stream_continuations_total` by result. */
  continuations: Record<string, number>;
  /** `smg_worker_progress_deadline_misses_total` by phase. */
  deadlineMisses: Record<string, number>;
  /** e2e of the streams without a failure, unbroken and broken, ms. */
  unbrokenMs: Spread;
  brokenMs: Spread;
  /** The streams by how they were broken. */
  byGroup: Record<StreamGroup, GroupSummary>;
  faults: FaultRecord[];
}

/** One stream judged: how it was broken (null: it was not), what its client noticed wrong. */
export interface Verdict {
  broken: BreakKind | null;
  failures: FailureKind[];
}

/** Judges every record against its reference and the faults. */
export function judge(
  records: StreamRecord[],
  refs: Map<number, Reference>,
  faults: FaultRecord[],
  workerUrl: (id: string) => string | undefined,
): Verdict[] {
  return records.map((r) => ({
    broken: breakOf(r, faults, workerUrl),
    failures: failuresOf(r, refs.get(r.n)),
  }));
}

/** The summary of one run: `records` and their `verdicts` (same order), its faults and metrics. */
export function summarize(
  run: { migrationLimit: number; idleSecs: number },
  records: StreamRecord[],
  verdicts: Verdict[],
  faults: FaultRecord[],
  metricsText: string,
): RunSummary {
  const failures: Partial<Record<FailureKind, number>> = {};
  let failed = 0, brokenFailed = 0, brokenMismatch = 0;
  const okMs = { unbroken: [] as number[], broken: [] as number[] };
  const groups = new Map(STREAM_GROUPS.map((g) => [g, {
    n: 0,
    failed: 0,
    ms: [] as number[],
    first: [] as number[],
    gap: 0,
  }]));
  records.forEach((r, i) => {
    const { broken: b, failures: f } = verdicts[i];
    for (const k of f) failures[k] = (failures[k] ?? 0) + 1;
    if (f.length > 0) failed++;
    if (f.length === 0) (b ? okMs.broken : okMs.unbroken).push(r.endMs - r.startMs);
    if (b && f.length > 0) brokenFailed++;
    if (b && f.includes("text")) brokenMismatch++;
    const g = groups.get(b ?? "not broken")!;
    g.n++;
    if (f.length > 0) g.failed++;
    else {
      g.ms.push(r.endMs - r.startMs);
      g.first.push(r.firstEventMs - r.startMs);
      g.gap = Math.max(g.gap, r.maxGapMs);
    }
  });
  const byGroup = Object.fromEntries([...groups].map(([name, g]) => [name, {
    n: g.n,
    failed: g.failed,
    ms: spread(g.ms),
    firstEventMs: spread(g.first),
    maxGapMs: g.gap,
  }])) as Record<StreamGroup, GroupSummary>;
  return {
    ...run,
    streams: records.length,
    failed,
    failures,
    broken: verdicts.filter((v) => v.broken !== null).length,
    brokenFailed,
    brokenMismatch,
    continuations: counterBy(metricsText, "smg_stream_continuations_total", "result"),
    deadlineMisses: counterBy(metricsText, "smg_worker_progress_deadline_misses_total", "phase"),
    unbrokenMs: spread(okMs.unbroken),
    brokenMs: spread(okMs.broken),
    byGroup,
    faults,
  };
}

const secs = (ms: number) => (Number.isNaN(ms) ? "–" : (ms / 1000).toFixed(2));
const ratio = (a: number, b: number) =>
  Number.isNaN(a) || Number.isNaN(b) || b === 0 ? "–" : `${(a / b).toFixed(2)}×`;

/** `a 3, b 1`, or `–`. */
function counts(c: Record<string, number | undefined>): string {
  const parts = Object.entries(c).filter(([, n]) => n).sort((a, b) => b[1]! - a[1]!)
    .map(([k, n]) => `${k} ${n}`);
  return parts.length ? parts.join(", ") : "–";
}

/** The markdown table of the streams of `runs` by how they were broken. */
export function groupTable(runs: RunSummary[]): string {
  const rows = runs.flatMap((s) =>
    STREAM_GROUPS.map((name) => {
      const g = s.byGroup[name];
      return `| ${s.migrationLimit} | ${name} | ${g.n} | ${g.failed} | ${secs(g.ms.p50)} / ${
        secs(g.ms.p99)
      } | ${secs(g.firstEventMs.p50)} / ${secs(g.firstEventMs.p99)} | ${secs(g.maxGapMs)} |`;
    })
  );
  return [
    "| migration limit | streams | n | client-visible failures | e2e p50 / p99 s | first event p50 / p99 s | largest silence s |",
    "|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

/** The markdown table of `runs`, one row each. */
export function markdown(runs: RunSummary[]): string {
  const rows = runs.map((s) =>
    `| ${s.migrationLimit} | ${s.idleSecs} | ${s.streams} | ${s.failed}${
      s.failed ? ` (${counts(s.failures)})` : ""
    } | ${s.broken} | ${s.brokenFailed} | ${counts(s.continuations)} | ${s.brokenMismatch} | ${
      secs(s.unbrokenMs.p50)
    } / ${secs(s.unbrokenMs.p99)} | ${secs(s.brokenMs.p50)} / ${
      secs(s.brokenMs.p99)
    } (${s.brokenMs.n}) | ${ratio(s.brokenMs.p50, s.unbrokenMs.p50)} / ${
      ratio(s.brokenMs.p99, s.unbrokenMs.p99)
    } | ${counts(s.deadlineMisses)} |`
  );
  return [
    "| migration limit | idle deadline s | streams | client-visible failures | broken | broken failed | continuations (metric) | broken text mismatch | e2e unbroken p50 / p99 s | e2e broken p50 / p99 s (n) | broken / unbroken p50 / p99 | deadline misses |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}
