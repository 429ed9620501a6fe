/**
 * The fault matrix's report: one markdown row per fault, the goals checked per row (0 hung,
 * nothing left open on the workers, descriptors back to the baseline row's, the V8 heap in use
 * within `HEAP_SLACK_MB` of it), and the notes under the table. RSS is shown beside the heap but
 * not judged: V8 keeps the heap pages it grew into after a peak (a burst), so RSS stays up with
 * nothing in use; the heap's used size is what a leak would grow.
 */

import type { RowResult } from "./matrix.ts";
import type { ProcSample } from "./probe.ts";

/** Heap-in-use growth per process over the baseline's that still counts as "back" (MB). */
export const HEAP_SLACK_MB = 10;

/** Descriptor growth per process over the baseline's that still counts as back. */
export const FD_SLACK = 2;

const f1 = (x: number) => x.toFixed(1);
const signed = (x: number, digits = 0) => `${x >= 0 ? "+" : ""}${x.toFixed(digits)}`;

/** `504 3, sse-error 2`, or `–`. */
function failedList(failed: Record<string, number>): string {
  const parts = Object.entries(failed).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`);
  return parts.length ? parts.join(", ") : "–";
}

/**
 * What of the goals a row missed, against `base` (the baseline row of the same gateway, or the
 * row's own processes before it).
 */
export function verdict(r: RowResult, base: ProcSample | null): string[] {
  const miss: string[] = [];
  if (r.hung > 0) miss.push(`${r.hung} hung`);
  if (r.workerOpen > 0) miss.push(`${r.workerOpen} worker requests left open`);
  if (base && r.proc.fds - base.fds > FD_SLACK * r.processes) {
    miss.push(`fds +${r.proc.fds - base.fds}`);
  }
  if (base && r.proc.heapMb - base.heapMb > HEAP_SLACK_MB * r.processes) {
    miss.push(`heap +${f1(r.proc.heapMb - base.heapMb)} MB`);
  }
  return miss;
}

/** The table; `bases` maps a row id to the baseline it is compared with. */
export function markdown(rows: RowResult[], bases: Map<string, RowResult | null>): string {
  const out = [
    "| fault | started | 2xx | failed (by outcome) | hung | retried | steady whole answers p50/p99 ms | faulted by workers | RSS MB (Δ) | heap in use MB (Δ) | fds (Δ) | lag after p50/max ms | liveness max in row ms | goals |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    const base = r.procBefore ?? bases.get(r.id)?.proc ?? null;
    const miss = verdict(r, base);
    const d = (x: number, b: number | undefined, digits = 0) =>
      b === undefined ? "" : ` (${signed(x - b, digits)})`;
    out.push(
      `| ${r.title} | ${r.started}${r.skipped ? ` (+${r.skipped} not sent)` : ""} | ${r.ok} | ${
        failedList(r.failed)
      } | ${r.hung} | ${r.counters.retries}${
        r.counters.exhausted ? ` (${r.counters.exhausted} exhausted)` : ""
      } | ${Math.round(r.steadyMs.p50)}/${Math.round(r.steadyMs.p99)} | ${r.faulted || "–"} | ${
        f1(r.proc.rssMb)
      }${d(r.proc.rssMb, base?.rssMb, 1)} | ${f1(r.proc.heapMb)}${
        d(r.proc.heapMb, base?.heapMb, 1)
      } | ${r.proc.fds}${d(r.proc.fds, base?.fds)} | ${f1(r.lag.p50)}/${f1(r.lag.max)} | ${
        Math.round(r.livenessMaxMs)
      } | ${miss.length ? `✗ ${miss.join("; ")}` : "✓"} |`,
    );
  }
  const notes = rows.filter((r) => r.note).map((r) => `- ${r.title}: ${r.note}`);
  return [...out, "", ...notes].join("\n");
}
