/**
 * What tracing runs with, from SMG's two flags and OpenTelemetry's standard environment
 * variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
 * read once at start; a value that cannot be used stops the start with a one-line error naming
 * the variable. The flag beats the variables; a signal's own variable (`_TRACES_`) beats the
 * general one.
 *
 * - Collector: `--otlp-traces-endpoint`, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it
 *   is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` added over HTTP), else localhost:4317
 *   (gRPC) or localhost:4318 (HTTP). A bare `host:port` is `http://` (SMG's reading).
 * - Protocol: `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, `grpc` (SMG's, the default here) or
 *   `http/protobuf`; `http/json` is refused.
 * - `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` (`k=v,k=v`, values percent-decoded) and `_TIMEOUT` (ms).
 * - `OTEL_SERVICE_NAME` (default `smg`, as SMG) and `OTEL_RESOURCE_ATTRIBUTES`.
 * - `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`).
 * - `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
 *   `OTEL_BSP_EXPORT_TIMEOUT`.
 * - `OTEL_SDK_DISABLED=true` turns tracing off whatever the flag says.
 */

import type { TracingConfig } from "../config/types.ts";
import { ConfigError } from "../core/errors.ts";
import type { QueueOptions } from "./export.ts";
import { type SamplerName, SAMPLERS } from "./sampler.ts";
import type { Attrs } from "./span.ts";

/** The wire tracing speaks to its collector. */
export type OtlpProtocol = "grpc" | "http/protobuf";

/** Tracing's settings, resolved. */
export interface TracingSettings {
  /** The collector's URL (`http://host:port` for gRPC; the full `/v1/traces` URL over HTTP). */
  endpoint: string;
  /** Its protocol. */
  protocol: OtlpProtocol;
  /** Headers (metadata over gRPC) sent with every export. */
  headers: [string, string][];
  /** Resource attributes, `service.name` first. */
  resource: Attrs;
  /** The sampler and its ratio. */
  sampler: SamplerName;
  /** The ratio of the ratio samplers (default 1). */
  ratio: number;
  /** The batch queue's bounds and pace. */
  queue: QueueOptions;
  /** The gateway's version (`service.version`, the instrumentation scope's). */
  version: string;
}

/** Reads one environment variable. */
export type EnvReader = (name: string) => string | undefined;

/** The process's environment (needs `--allow-env=OTEL_*`; a denied read reads as unset). */
export const processEnv: EnvReader = (name) => {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
};

/** The variable's value, trimmed; undefined when unset or empty. */
function read(env: EnvReader, name: string): string | undefined {
  const v = env(name)?.trim();
  return v === undefined || v === "" ? undefined : v;
}

/** A signal's own variable, else the general one: [name, value]. */
function either(env: EnvReader, suffix: string): [string, string] | undefined {
  for (const name of [`OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`]) {
    const v = read(env, name);
    if (v !== undefined) return [name, v];
  }
  return undefined;
}

function count(env: EnvReader, name: string, dflt: number, min: number): number {
  const raw = read(env, name);
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw new ConfigError(`${name}: an integer >= ${min}, got '${raw}'`);
  }
  return n;
}

/** `http://` added to a bare `host:port`; a URL checked. */
function url(name: string, raw: string): URL {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new ConfigError(`${name}: not a host:port or URL: '${raw}'`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new ConfigError(
      `${name}: the collector is reached over http:// or https://, got '${raw}'`,
    );
  }
  return u;
}

/** `k=v,k=v` with percent-encoded values (the OTEL header and resource lists). */
function pairs(name: string, raw: string): [string, string][] {
  const out: [string, string][] = [];
  for (const part of raw.split(",")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    const k = part.slice(0, eq).trim();
    if (eq <= 0 || k === "") throw new ConfigError(`${name}: '${part.trim()}' is not key=value`);
    try {
      out.push([k, decodeURIComponent(part.slice(eq + 1).trim())]);
    } catch {
      throw new ConfigError(`${name}: '${part.trim()}' has a broken percent-encoding`);
    }
  }
  return out;
}

/** The collector's URL for `protocol`. */
function endpointOf(cfg: TracingConfig, env: EnvReader, protocol: OtlpProtocol): string {
  const http = protocol === "http/protobuf";
  if (cfg.endpoint !== null) {
    const u = url("--otlp-traces-endpoint", cfg.endpoint);
    if (http && (u.pathname === "" || u.pathname === "/")) u.pathname = "/v1/traces";
    return http ? u.href : u.origin;
  }
  const own = read(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (own !== undefined) {
    const u = url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", own);
    return http ? u.href : u.origin;
  }
  const base = read(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  if (base !== undefined) {
    const u = url("OTEL_EXPORTER_OTLP_ENDPOINT", base);
    if (!http) return u.origin;
    u.pathname = `${u.pathname.replace(/\/+$/, "")}/v1/traces`;
    return u.href;
  }
  return http ? "http://localhost:4318/v1/traces" : "http://localhost:4317";
}

/**
 * Tracing's settings for `cfg` and the environment, or null when tracing is off (no
 * `--enable-trace`, or `OTEL_SDK_DISABLED=true`); throws `ConfigError` on a value it cannot use.
 */
export function tracingSettings(
  cfg: TracingConfig,
  env: EnvReader = processEnv,
  version = "",
): TracingSettings | null {
  if (!cfg.enabled || read(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return null;
  const p = either(env, "PROTOCOL");
  const protocol = (p?.[1] ?? "grpc") as OtlpProtocol;
  if (protocol !== "grpc" && protocol !== "http/protobuf") {
    throw new ConfigError(`${p![0]}: grpc or http/protobuf, got '${p![1]}'`);
  }
  const h = either(env, "HEADERS");
  const headers = h ? pairs(h[0], h[1]) : [];
  const t = either(env, "TIMEOUT");
  const sampler = (read(env, "OTEL_TRACES_SAMPLER") ?? "parentbased_always_on") as SamplerName;
  if (!SAMPLERS.includes(sampler)) {
    throw new ConfigError(`OTEL_TRACES_SAMPLER: one of ${SAMPLERS.join(", ")}, got '${sampler}'`);
  }
  const rawRatio = read(env, "OTEL_TRACES_SAMPLER_ARG");
  const ratio = rawRatio === undefined ? 1 : Number(rawRatio);
  if (sampler.endsWith("traceidratio") && !(ratio >= 0 && ratio <= 1)) {
    throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG: a ratio from 0 to 1, got '${rawRatio}'`);
  }
  const resourceAttrs = read(env, "OTEL_RESOURCE_ATTRIBUTES");
  const given = resourceAttrs ? pairs("OTEL_RESOURCE_ATTRIBUTES", resourceAttrs) : [];
  const service = read(env, "OTEL_SERVICE_NAME") ??
    given.find(([k]) => k === "service.name")?.[1] ?? "smg";
  const resource: Attrs = ["service.name", service];
  if (version) resource.push("service.version", version);
  for (const [k, v] of given) if (k !== "service.name") resource.push(k, v);
  resource.push("telemetry.sdk.name", "smg-ts", "telemetry.sdk.language", "js");
  const timeoutMs = t ? count(env, t[0], 10_000, 1) : 10_000;
  const batch = count(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1);
  const queue: QueueOptions = {
    maxQueue: Math.max(batch, count(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1)),
    batch,
    delayMs: count(env, "OTEL_BSP_SCHEDULE_DELAY", 500, 0),
    timeoutMs: count(env, "OTEL_BSP_EXPORT_TIMEOUT", timeoutMs, 1),
  };
  return {
    endpoint: endpointOf(cfg, env, protocol),
    protocol,
    headers,
    resource,
    sampler,
    ratio,
    queue,
    version,
  };
}

/**
 * The collector's `host:port` for the runtime net grant (`localhost` also as its loopback
 * addresses, which a client may dial once it has resolved the name).
 */
export function collectorGrant(s: TracingSettings): string[] {
  const u = new URL(s.endpoint);
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  const hosts = u.hostname === "localhost" ? ["localhost", "127.0.0.1", "[::1]"] : [u.hostname];
  return hosts.map((h) => `${h}:${port}`);
}
