/**
 * Tracing, SMG's flags: `--enable-trace` turns OpenTelemetry tracing on, `--otlp-traces-endpoint`
 * names the collector. Everything else (protocol, headers, service name, resource attributes,
 * sampler, batching) comes from the standard `OTEL_*` environment variables, read at start by
 * `lib/tracing/settings.ts`.
 */

import { nonEmpty } from "./checks.ts";
import type { Flags } from "./flag.ts";
import { bool, str } from "./kinds.ts";
import type { TracingConfig } from "./types.ts";

/** Tracing, in --help order. */
export const TRACING_FLAGS: Flags<TracingConfig> = {
  enabled: {
    name: "enable-trace",
    kind: bool,
    default: false,
    help: "Export each request's spans over OTLP (OpenTelemetry); OTEL_* variables tune it",
  },
  endpoint: {
    name: "otlp-traces-endpoint",
    kind: str,
    default: null,
    help: "OTLP collector, host:port or URL (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, " +
      "OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317 over gRPC)",
    check: nonEmpty,
  },
};
