/**
 * Tracing as a feature of the gateway (`--enable-trace`): the tracer the request path asks for
 * each request's trace, and the queue that exports the spans (`export.ts`) over the transport
 * the settings name. Started first and stopped last, so shutdown exports the spans of the
 * requests it drained, within `flushMs`.
 */

import type { Clock } from "../core/clock.ts";
import type { Feature } from "../core/feature.ts";
import type { Logger } from "../core/log.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { SpanQueue, type Transport } from "./export.ts";
import { OtlpEncoder } from "./otlp.ts";
import { sampler } from "./sampler.ts";
import type { TracingSettings } from "./settings.ts";
import { transportFor } from "./transport.ts";
import { Tracer } from "./span.ts";

/** Tracing, built. */
export interface Tracing extends Feature {
  /** Starts requests' traces. */
  readonly tracer: Tracer;
  /** The export queue (tests flush it). */
  readonly queue: SpanQueue;
}

/**
 * What the gateway is given to trace with (`--enable-trace`): the settings `tracingSettings`
 * read, and, for tests, the transport to the collector and a wall clock.
 */
export interface TracingInit {
  settings: TracingSettings;
  /** The transport (default: the settings' protocol toward their endpoint). */
  transport?: Transport;
  /** Wall-clock ms since the epoch (default: the time origin plus `performance.now()`). */
  now?: () => number;
}

/** What tracing is built from besides its init. */
export interface TracingDeps {
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** How long shutdown waits for the last spans to be exported, ms. */
  flushMs: number;
}

/** Tracing over `init`, or null without one (tracing off). */
export function createTracing(
  init: TracingInit | null | undefined,
  d: TracingDeps,
): Tracing | null {
  if (!init) return null;
  const s = init.settings;
  const exported = d.metrics.traceExported.with();
  const dropped = {
    queue_full: d.metrics.traceDropped.with("queue_full"),
    export_failed: d.metrics.traceDropped.with("export_failed"),
    collector_down: d.metrics.traceDropped.with("collector_down"),
  };
  const queued = d.metrics.traceQueued.with();
  const encoder = new OtlpEncoder({
    resource: s.resource,
    scope: { name: "smg", version: s.version },
  });
  const log = d.log.child({ module: "tracing" });
  const transport = init.transport ?? transportFor(s);
  const queue = new SpanQueue(s.queue, encoder, transport, d.clock, log, {
    exported: (n) => exported.inc(n),
    dropped: (reason, n) => dropped[reason].inc(n),
  });
  const tracer = new Tracer({ sampler: sampler(s.sampler, s.ratio), sink: queue, now: init.now });
  return {
    name: "tracing",
    tracer,
    queue,
    start() {
      log.info("exporting traces", {
        collector: transport.target,
        protocol: s.protocol,
        sampler: s.sampler,
        ratio: s.sampler.endsWith("traceidratio") ? s.ratio : undefined,
      });
    },
    stop: () => queue.close(d.flushMs),
    gauges: () => queued.set(queue.size),
  };
}
