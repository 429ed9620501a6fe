/**
 * The process's own memory, read when `/metrics` is rendered (not kept up to date between
 * scrapes): resident set, and the V8 heap of the isolate that serves the gateway (its used and
 * committed sizes, and memory V8 accounts for outside the heap). RSS alone cannot tell a leak
 * from heap V8 keeps after a peak; the heap's used size can. Names: Prometheus's standard
 * `process_resident_memory_bytes`, ours under `smg_process_*` (SMG exports none of these).
 */

import type { FastGauge } from "./fast.ts";
import type { FamilyBuilder } from "./families.ts";

/** Process memory metrics. */
export interface ProcessMetrics {
  /** process_resident_memory_bytes */
  readonly residentMemory: FastGauge;
  /** smg_process_heap_used_bytes */
  readonly heapUsed: FastGauge;
  /** smg_process_heap_total_bytes */
  readonly heapTotal: FastGauge;
  /** smg_process_external_memory_bytes */
  readonly externalMemory: FastGauge;
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function processMetrics(f: FamilyBuilder): ProcessMetrics {
  return {
    residentMemory: f.gauge("process_resident_memory_bytes", "Resident memory size in bytes"),
    heapUsed: f.gauge("smg_process_heap_used_bytes", "V8 heap in use by live and dead objects"),
    heapTotal: f.gauge("smg_process_heap_total_bytes", "V8 heap committed (used and free)"),
    externalMemory: f.gauge(
      "smg_process_external_memory_bytes",
      "Memory outside the V8 heap held by JavaScript objects (buffers)",
    ),
  };
}

/** Sets the gauges of `m` from the runtime's figures now. */
export function sampleProcess(m: ProcessMetrics): void {
  const u = Deno.memoryUsage();
  m.residentMemory.with().set(u.rss);
  m.heapUsed.with().set(u.heapUsed);
  m.heapTotal.with().set(u.heapTotal);
  m.externalMemory.with().set(u.external);
}
