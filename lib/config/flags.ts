/**
 * The gateway's flags as data: SMG's name, the kind of value, help text, and where the value
 * goes in `GatewayConfig`. `cli.ts` builds the parser and `--help` from this table.
 */

import { LOG_LEVELS } from "../core/log.ts";
import { type GatewayConfig, POLICY_NAMES } from "./config.ts";
import { DISCOVERY_FLAGS } from "./discovery_flags.ts";
import { MESH_FLAGS } from "./mesh_flags.ts";
import { ROUTING_FLAGS } from "./routing_flags.ts";

/** How a flag's value is parsed. */
export type Kind = "int" | "float" | "string" | "bool" | "list" | "intlist" | {
  choices: readonly string[];
};

/** One flag. */
export interface FlagSpec {
  /** Long flag name without dashes. */
  name: string;
  kind: Kind;
  help: string;
  /** Other spellings SMG accepts. */
  aliases?: string[];
  /** Writes the parsed value into the config. */
  apply: (c: GatewayConfig, v: never) => void;
  /** Shown as the default in --help. */
  shown?: (d: GatewayConfig) => unknown;
}

/** The gateway flags, in --help order. */
export const FLAGS: FlagSpec[] = [
  {
    name: "host",
    kind: "string",
    help: "address to listen on",
    apply: (c, v) => (c.host = v),
    shown: (d) => d.host,
  },
  {
    name: "port",
    kind: "int",
    help: "port to listen on",
    apply: (c, v) => (c.port = v),
    shown: (d) => d.port,
  },
  {
    name: "worker-urls",
    kind: "list",
    help: "worker base URLs registered at start",
    apply: (c, v) => (c.workerUrls = v),
  },
  {
    name: "policy",
    kind: { choices: POLICY_NAMES },
    help: "routing policy",
    apply: (c, v) => (c.policy = v),
    shown: (d) => d.policy,
  },
  {
    name: "prometheus-host",
    kind: "string",
    help: "metrics listen address",
    apply: (c, v) => (c.prometheusHost = v),
    shown: (d) => d.prometheusHost,
  },
  {
    name: "prometheus-port",
    kind: "int",
    help: "metrics port (GET /metrics)",
    apply: (c, v) => (c.prometheusPort = v),
    shown: (d) => d.prometheusPort,
  },
  {
    name: "api-key",
    kind: "string",
    help: "bearer key required from clients; also sent to startup workers",
    apply: (c, v) => (c.apiKey = v),
  },
  {
    name: "request-timeout-secs",
    kind: "int",
    help: "total time for one request, stream included",
    apply: (c, v) => (c.requestTimeoutSecs = v),
    shown: (d) => d.requestTimeoutSecs,
  },
  {
    name: "max-payload-size",
    kind: "int",
    help: "largest request body in bytes",
    apply: (c, v) => (c.maxPayloadSize = v),
    shown: (d) => d.maxPayloadSize,
  },
  {
    name: "upstream-pool-idle-timeout-secs",
    kind: "int",
    help: "idle worker connections close after this",
    apply: (c, v) => (c.upstreamPoolIdleTimeoutSecs = v),
    shown: (d) => d.upstreamPoolIdleTimeoutSecs,
  },
  {
    name: "model-path",
    kind: "string",
    help: "model directory; its tokenizer serves grpc:// workers (the gateway tokenizes)",
    apply: (c, v) => (c.modelPath = v),
  },
  {
    name: "tokenizer-path",
    kind: "string",
    help: "tokenizer directory or tokenizer.json (default: --model-path)",
    apply: (c, v) => (c.tokenizerPath = v),
  },
  {
    name: "http-server",
    kind: { choices: ["own", "deno"] },
    help: "main port server: own (HTTP/1.1, cheapest) or deno (Deno.serve, also h2c)",
    apply: (c, v) => (c.httpServer = v),
    shown: (d) => d.httpServer,
  },
  {
    name: "shutdown-grace-period-secs",
    kind: "int",
    help: "time in-flight requests get after SIGTERM",
    apply: (c, v) => (c.shutdownGracePeriodSecs = v),
    shown: (d) => d.shutdownGracePeriodSecs,
  },
  {
    name: "log-level",
    kind: { choices: LOG_LEVELS },
    help: "log level (RUST_LOG adds per-module filters)",
    apply: (c, v) => (c.logLevel = v),
    shown: (d) => d.logLevel,
  },
  {
    name: "log-json",
    kind: "bool",
    help: "JSON log lines instead of logfmt",
    apply: (c, v) => (c.logJson = v),
  },
  {
    name: "request-id-headers",
    kind: "list",
    help: "headers a client request id is read from",
    apply: (c, v: string[]) => (c.requestIdHeaders = v.map((h) => h.toLowerCase())),
    shown: (d) => d.requestIdHeaders.join(" "),
  },
  {
    name: "routing-key-headers",
    kind: "list",
    help: "headers a routing key is read from",
    apply: (c, v: string[]) => (c.routingKeyHeaders = v.map((h) => h.toLowerCase())),
    shown: (d) => d.routingKeyHeaders.join(" "),
  },
  {
    name: "random-seed",
    kind: "int",
    help: "seed for routing randomness (reproducible runs)",
    apply: (c, v) => (c.randomSeed = v),
  },
  // Health checks and worker lifecycle.
  {
    name: "health-check-interval-secs",
    kind: "int",
    help: "seconds between worker health probes",
    apply: (c, v) => (c.health.intervalSecs = v),
    shown: (d) => d.health.intervalSecs,
  },
  {
    name: "health-check-timeout-secs",
    kind: "int",
    help: "health probe timeout",
    apply: (c, v) => (c.health.timeoutSecs = v),
    shown: (d) => d.health.timeoutSecs,
  },
  {
    name: "health-failure-threshold",
    kind: "int",
    help: "failed probes before a worker is taken out",
    apply: (c, v) => (c.health.failureThreshold = v),
    shown: (d) => d.health.failureThreshold,
  },
  {
    name: "health-success-threshold",
    kind: "int",
    help: "good probes before a worker comes back",
    apply: (c, v) => (c.health.successThreshold = v),
    shown: (d) => d.health.successThreshold,
  },
  {
    name: "health-check-endpoint",
    kind: "string",
    help: "path probed on each worker",
    apply: (c, v) => (c.health.endpoint = v),
    shown: (d) => d.health.endpoint,
  },
  {
    name: "disable-health-check",
    kind: "bool",
    help: "no periodic probes; workers start ready",
    apply: (c, v) => (c.health.disabled = v),
  },
  {
    name: "remove-unhealthy-workers",
    kind: "bool",
    aliases: ["worker-auto-recovery"],
    help: "remove workers that reach the failed state",
    apply: (c, v) => (c.health.removeUnhealthy = v),
  },
  {
    name: "drain-settle-secs",
    kind: "int",
    help: "seconds a removed worker drains first",
    apply: (c, v) => (c.health.drainSettleSecs = v),
    shown: (d) => d.health.drainSettleSecs,
  },
  {
    name: "worker-startup-timeout-secs",
    kind: "int",
    help: "time a new worker has to answer its first probe",
    apply: (c, v) => (c.health.startupTimeoutSecs = v),
    shown: (d) => d.health.startupTimeoutSecs,
  },
  {
    name: "worker-startup-check-interval",
    kind: "int",
    help: "seconds between probes of a starting worker",
    apply: (c, v) => (c.health.startupCheckIntervalSecs = v),
    shown: (d) => d.health.startupCheckIntervalSecs,
  },
  // Circuit breaker.
  {
    name: "cb-failure-threshold",
    kind: "int",
    help: "consecutive failures that open a worker's breaker",
    apply: (c, v) => (c.circuitBreaker.failureThreshold = v),
    shown: (d) => d.circuitBreaker.failureThreshold,
  },
  {
    name: "cb-success-threshold",
    kind: "int",
    help: "half-open successes that close it",
    apply: (c, v) => (c.circuitBreaker.successThreshold = v),
    shown: (d) => d.circuitBreaker.successThreshold,
  },
  {
    name: "cb-timeout-duration-secs",
    kind: "int",
    help: "seconds open before half-open",
    apply: (c, v) => (c.circuitBreaker.timeoutSecs = v),
    shown: (d) => d.circuitBreaker.timeoutSecs,
  },
  {
    name: "cb-window-duration-secs",
    kind: "int",
    help: "failures further apart do not add up",
    apply: (c, v) => (c.circuitBreaker.windowSecs = v),
    shown: (d) => d.circuitBreaker.windowSecs,
  },
  {
    name: "disable-circuit-breaker",
    kind: "bool",
    help: "never open breakers",
    apply: (c, v) => (c.circuitBreaker.disabled = v),
  },
  // Retries.
  {
    name: "retry-max-retries",
    kind: "int",
    help: "total attempts per request, the first included",
    apply: (c, v) => (c.retry.maxAttempts = v),
    shown: (d) => d.retry.maxAttempts,
  },
  {
    name: "retry-initial-backoff-ms",
    kind: "int",
    help: "delay before the first retry",
    apply: (c, v) => (c.retry.initialBackoffMs = v),
    shown: (d) => d.retry.initialBackoffMs,
  },
  {
    name: "retry-max-backoff-ms",
    kind: "int",
    help: "cap on a retry delay",
    apply: (c, v) => (c.retry.maxBackoffMs = v),
    shown: (d) => d.retry.maxBackoffMs,
  },
  {
    name: "retry-backoff-multiplier",
    kind: "float",
    help: "delay growth per retry",
    apply: (c, v) => (c.retry.multiplier = v),
    shown: (d) => d.retry.multiplier,
  },
  {
    name: "retry-jitter-factor",
    kind: "float",
    help: "relative jitter of a delay, 0..1",
    apply: (c, v) => (c.retry.jitter = v),
    shown: (d) => d.retry.jitter,
  },
  {
    name: "disable-retries",
    kind: "bool",
    help: "one attempt per request",
    apply: (c, v) => (c.retry.disabled = v),
  },
  // Load monitor and overload veto.
  {
    name: "load-monitor-interval",
    kind: "int",
    help: "seconds between worker load polls",
    apply: (c, v) => (c.loadMonitor.intervalSecs = v),
    shown: (d) => d.loadMonitor.intervalSecs,
  },
  {
    name: "disable-load-monitoring",
    kind: "bool",
    help: "poll loads only when a policy needs them",
    apply: (c, v) => (c.loadMonitor.disabled = v),
  },
  {
    name: "worker-overload-protection",
    kind: "bool",
    help: "veto workers at 90% KV usage",
    apply: (c, v: boolean) => {
      if (v) c.loadMonitor.overloadTokenUsage ??= 0.9;
    },
  },
  {
    name: "worker-overload-waiting-requests",
    kind: "int",
    help: "veto workers with this many waiting requests",
    apply: (c, v) => (c.loadMonitor.overloadWaitingRequests = v),
  },
  {
    name: "worker-overload-token-usage",
    kind: "float",
    help: "veto workers at this KV usage, (0, 1]",
    apply: (c, v) => (c.loadMonitor.overloadTokenUsage = v),
  },
  // Admission.
  {
    name: "max-concurrent-requests",
    kind: "int",
    help: "requests served at once; -1 is unlimited",
    apply: (c, v) => (c.admission.maxConcurrentRequests = v),
    shown: (d) => d.admission.maxConcurrentRequests,
  },
  {
    name: "queue-size",
    kind: "int",
    help: "requests that may wait for a slot",
    apply: (c, v) => (c.admission.queueSize = v),
    shown: (d) => d.admission.queueSize,
  },
  {
    name: "queue-timeout-secs",
    kind: "int",
    help: "seconds a request may wait for a slot",
    apply: (c, v) => (c.admission.queueTimeoutSecs = v),
    shown: (d) => d.admission.queueTimeoutSecs,
  },
  ...ROUTING_FLAGS,
  ...MESH_FLAGS,
  ...DISCOVERY_FLAGS,
];
