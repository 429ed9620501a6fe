/**
 * Tracing's own metrics (ours; SMG exports none): spans the collector accepted, spans dropped
 * by why (`queue_full`: the batch queue was full, the collector slower than the requests;
 * `export_failed`: the collector refused, failed or did not answer in time; `collector_down`:
 * exports failing in a row, new spans dropped before they are encoded), and spans waiting.
 */

import type { FastCounter, FastGauge } from "./fast.ts";
import type { FamilyBuilder } from "./families.ts";

/** Tracing metrics. */
export interface TracingMetrics {
  /** smg_trace_spans_exported_total */
  readonly traceExported: FastCounter;
  /** smg_trace_spans_dropped_total{reason} */
  readonly traceDropped: FastCounter;
  /** smg_trace_queue_spans */
  readonly traceQueued: FastGauge;
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function tracingMetrics(f: FamilyBuilder): TracingMetrics {
  return {
    traceExported: f.counter(
      "smg_trace_spans_exported_total",
      "Trace spans the OTLP collector accepted",
      [],
    ),
    traceDropped: f.counter(
      "smg_trace_spans_dropped_total",
      "Trace spans dropped, by reason: queue_full, export_failed, collector_down",
      ["reason"],
    ),
    traceQueued: f.gauge("smg_trace_queue_spans", "Trace spans waiting to be exported"),
  };
}
