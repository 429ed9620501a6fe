/**
 * The worker-lifecycle flags, declared once (see `flag.ts`): health probing, the circuit
 * breaker, retries, and load polling with the overload veto.
 */

import { atLeast, must } from "./checks.ts";
import type { Flags } from "./flag.ts";
import { bool, float, int, str } from "./kinds.ts";
import type {
  CircuitBreakerConfig,
  HealthConfig,
  LoadMonitorConfig,
  RetryConfig,
} from "./types.ts";

/** Health probing, in --help order. */
export const HEALTH_FLAGS: Flags<HealthConfig> = {
  intervalSecs: {
    name: "health-check-interval-secs",
    kind: int,
    default: 60,
    help: "seconds between worker health probes",
    check: atLeast(1),
  },
  timeoutSecs: {
    name: "health-check-timeout-secs",
    kind: int,
    default: 5,
    help: "health probe timeout",
    check: atLeast(1),
  },
  failureThreshold: {
    name: "health-failure-threshold",
    kind: int,
    default: 3,
    help: "failed probes before a worker is taken out",
    check: atLeast(1),
  },
  successThreshold: {
    name: "health-success-threshold",
    kind: int,
    default: 2,
    help: "good probes before a worker comes back",
    check: atLeast(1),
  },
  endpoint: {
    name: "health-check-endpoint",
    kind: str,
    default: "/health",
    help: "path probed on each worker",
    check: must((v) => v.startsWith("/"), "must start with /"),
  },
  disabled: {
    name: "disable-health-check",
    kind: bool,
    default: false,
    help: "no periodic probes; workers start ready",
  },
  removeUnhealthy: {
    name: "remove-unhealthy-workers",
    aliases: ["worker-auto-recovery"],
    kind: bool,
    default: false,
    help: "remove workers that reach the failed state",
  },
  drainSettleSecs: {
    name: "drain-settle-secs",
    kind: int,
    default: 5,
    help: "seconds a removed worker drains first",
    check: atLeast(0),
  },
  startupTimeoutSecs: {
    name: "worker-startup-timeout-secs",
    kind: int,
    default: 1800,
    help: "time a new worker has to answer its first probe",
    check: atLeast(1),
  },
  startupCheckIntervalSecs: {
    name: "worker-startup-check-interval",
    kind: int,
    default: 30,
    help: "seconds between probes of a starting worker",
    check: atLeast(1),
  },
};

/** The circuit breaker, in --help order. */
export const CIRCUIT_BREAKER_FLAGS: Flags<CircuitBreakerConfig> = {
  failureThreshold: {
    name: "cb-failure-threshold",
    kind: int,
    default: 10,
    help: "consecutive failures that open a worker's breaker",
    check: atLeast(1),
  },
  successThreshold: {
    name: "cb-success-threshold",
    kind: int,
    default: 3,
    help: "half-open successes that close it",
    check: atLeast(1),
  },
  timeoutSecs: {
    name: "cb-timeout-duration-secs",
    kind: int,
    default: 60,
    help: "seconds open before half-open",
    check: atLeast(1),
  },
  windowSecs: {
    name: "cb-window-duration-secs",
    kind: int,
    default: 120,
    help: "failures further apart do not add up",
    check: atLeast(1),
  },
  disabled: {
    name: "disable-circuit-breaker",
    kind: bool,
    default: false,
    help: "never open breakers",
  },
};

/** Retries, in --help order. */
export const RETRY_FLAGS: Flags<RetryConfig> = {
  maxAttempts: {
    name: "retry-max-retries",
    kind: int,
    default: 5,
    help: "total attempts per request, the first included",
    check: atLeast(1),
  },
  initialBackoffMs: {
    name: "retry-initial-backoff-ms",
    kind: int,
    default: 50,
    help: "delay before the first retry",
    check: atLeast(0),
  },
  maxBackoffMs: {
    name: "retry-max-backoff-ms",
    kind: int,
    default: 30000,
    help: "cap on a retry delay",
    check: atLeast(0),
  },
  multiplier: {
    name: "retry-backoff-multiplier",
    kind: float,
    default: 1.5,
    help: "delay growth per retry",
    check: atLeast(1),
  },
  jitter: {
    name: "retry-jitter-factor",
    kind: float,
    default: 0.2,
    help: "relative jitter of a delay, 0..1",
    check: must((v) => v >= 0 && v <= 1, "allowed: 0..1"),
  },
  disabled: {
    name: "disable-retries",
    kind: bool,
    default: false,
    help: "one attempt per request",
  },
};

/** Load polling and the overload veto, in --help order. */
export const LOAD_MONITOR_FLAGS: Flags<LoadMonitorConfig> = {
  intervalSecs: {
    name: "load-monitor-interval",
    kind: int,
    default: 10,
    help: "seconds between worker load polls",
    check: atLeast(1),
  },
  disabled: {
    name: "disable-load-monitoring",
    kind: bool,
    default: false,
    help: "poll loads only when a policy needs them",
  },
  overloadWaitingRequests: {
    name: "worker-overload-waiting-requests",
    kind: int,
    default: null,
    help: "veto workers with this many waiting requests",
    check: atLeast(1),
  },
  overloadTokenUsage: {
    name: "worker-overload-token-usage",
    kind: float,
    default: null,
    help: "veto workers at this KV usage, (0, 1]",
    check: must((v) => v > 0 && v <= 1, "allowed: (0, 1]"),
    shorthand: {
      name: "worker-overload-protection",
      value: 0.9,
      help: "veto workers at 90% KV usage",
    },
  },
};
