/**
 * The gateway's one configuration type, with what each field means. Each field's flag,
 * default, help and check are declared once, in the `*_flags.ts` files; `config.ts` re-exports
 * this type with the defaults, `cli.ts` fills it from flags, `validate.ts` checks it at start.
 */

import type { LogLevel } from "../core/log.ts";
import type { ControlPlaneKey } from "./control_plane.ts";
import type { FrontLimitsConfig } from "./front_types.ts";
import type { MeshConfig } from "./mesh_types.ts";
import type { DiscoveryConfig } from "./discovery_types.ts";

export type { ControlPlaneKey, ControlPlaneRole } from "./control_plane.ts";
export type { FrontLimitsConfig } from "./front_types.ts";
export type { MeshConfig } from "./mesh_types.ts";
export type { DiscoveryConfig, ModelIdSource } from "./discovery_types.ts";

/** Every policy name SMG accepts for `--policy`. */
export const POLICY_NAMES = [
  "random",
  "round_robin",
  "passthrough",
  "cache_aware",
  "power_of_two",
  "least_load",
  "prefix_hash",
  "consistent_hashing",
  "manual",
  "bucket",
] as const;

/** A policy name. */
export type PolicyName = typeof POLICY_NAMES[number];

/** How manual (and sticky sessions) place a key they have not pinned yet. */
export type AssignmentMode = "random" | "min_load" | "min_group" | "delegate";

/** The assignment modes, for validation and help. */
export const ASSIGNMENT_MODES: readonly AssignmentMode[] = [
  "random",
  "min_load",
  "min_group",
  "delegate",
];

/** least_load's expected-wait model (power_of_two always uses the defaults). */
export interface LeastLoadConfig {
  /** λ, seconds of penalty scale for KV usage k: λ·k/(1−k) (`--least-load-kv-pressure-weight`). */
  kvPressureWeight: number;
  /** Tokens/s assumed when a worker reports none (`--least-load-default-throughput`). */
  defaultThroughput: number;
  /** Tokens per waiting request when a worker reports no token counts (`--least-load-mean-prefill-tokens`). */
  meanPrefillTokens: number;
  /** Waiting requests at which a worker is skipped; 0 is off (`--least-load-max-waiting-requests`). */
  maxWaitingRequests: number;
  /**
   * How least_load, power_of_two and cache_aware's misses rank workers (`--wait-model`, ours):
   * `backlog` by the prompt tokens this gateway sent that await their first token, then
   * in-flight count; `smg` by SMG's queued tokens ÷ reported generation throughput + KV pressure.
   */
  waitModel: "backlog" | "smg";
}

/** prefix_hash tuning. */
export interface PrefixHashConfig {
  /** Leading tokens hashed (of text: at the learned characters per token) (`--prefix-token-count`). */
  prefixTokenCount: number;
  /** Leave the ring worker above this multiple of the average in-flight (`--prefix-hash-load-factor`). */
  loadFactor: number;
  /** ...and above average + this many requests (`--prefix-hash-balance-abs-threshold`). */
  balanceAbsThreshold: number;
}

/** cache_aware tuning. */
export interface CacheAwareConfig {
  /** A prefix match above this share of the request is a hit (`--cache-threshold`). */
  cacheThreshold: number;
  /** Spill a hit when the holder has this many more in-flight than average... (`--balance-abs-threshold`). */
  balanceAbsThreshold: number;
  /** ...and this multiple of the average (`--balance-rel-threshold`). */
  balanceRelThreshold: number;
  /** KV usage spread that makes every request go by expected wait; 1.0 is off (`--balance-token-usage-threshold`). */
  balanceTokenUsageThreshold: number;
  /** KV usage on any worker that does the same; 1.0 is off (`--overload-token-usage-threshold`). */
  overloadTokenUsageThreshold: number;
  /** Discount holders by their queued uncached tokens; 0 is off (`--overlap-decay`). */
  overlapDecay: number;
  /** Softmax temperature over holder scores; 0 is argmax (`--selection-temperature`). */
  selectionTemperature: number;
  /** Tree budget in characters or tokens, shared by all workers (`--max-tree-size`). */
  maxTreeSize: number;
  /** Tokens per page of the token tree (`--block-size`). */
  blockSize: number;
  /** Prefix index: radix trees or hashed heads at `--cache-boundaries` (`--cache-index`). */
  cacheIndex: "tree" | "hash";
  /** Seconds a hash-index placement lives without use (`--cache-ttl-secs`). */
  cacheTtlSecs: number;
  /**
   * Cost scoring: tokens of cost per token of uncached work a worker was sent recently (decayed
   * over `workHorizonSecs`) above the least sent candidate's; 0 is off
   * (`--cache-aware-work-weight`, ours).
   */
  workWeight: number;
  /** Time constant of that recent work, seconds (`--cache-aware-work-horizon-secs`, ours). */
  workHorizonSecs: number;
  /**
   * How a hit's worker is chosen (`--cache-aware-scoring`, ours): `cost` scores every candidate
   * by the tokens it would prefill (uncached given its match, plus its backlog); `smg` is SMG's
   * threshold and balance gate.
   */
  scoring: "cost" | "smg";
  /**
   * KV-event mode (`--kv-events`, ours): `auto` subscribes to the cache events of gRPC workers
   * and of HTTP workers labelled `kv_events`, and routes on them where they hold anything; `off`.
   */
  kvEvents: "auto" | "off";
  /**
   * Whether an answer reporting clearly fewer cached tokens than the tree held makes the tree
   * forget the worker's stale branches, and with the mesh on the peers' trees too, and a worker's
   * part of the tree is kept within the KV capacity it states (`--tree-feedback`, ours).
   */
  treeFeedback: "on" | "off";
  /** A KV-index key neither stored nor read for this long is pruned; 0 off (`--kv-indexer-ttl-secs`). */
  kvIndexerTtlSecs: number;
  /** Most KV-index keys per model before the oldest are pruned; 0 off (`--kv-indexer-max-entries`). */
  kvIndexerMaxEntries: number;
}

/** `--cache-aware-scoring` values. */
export const CACHE_AWARE_SCORINGS = ["cost", "smg"] as const;

/** `--wait-model` values. */
export const WAIT_MODELS = ["backlog", "smg"] as const;

/** A prefill worker given with `--prefill URL [BOOTSTRAP_PORT]`. */
export interface PrefillSpec {
  /** Base URL. */
  url: string;
  /** Its bootstrap port (`none` or absent: null). */
  bootstrapPort: number | null;
}

/** Prefill/decode disaggregation. */
export interface PdConfig {
  /** Route every request to a prefill and a decode worker (`--pd-disaggregation`). */
  enabled: boolean;
  /** Prefill workers at start (`--prefill URL [PORT]`, repeatable). */
  prefill: PrefillSpec[];
  /** Decode workers at start (`--decode URL`, repeatable). */
  decode: string[];
  /** Policy of the prefill leg; null uses `--policy` (`--prefill-policy`). */
  prefillPolicy: PolicyName | null;
  /** Policy of the decode leg; null uses `--policy` (`--decode-policy`). */
  decodePolicy: PolicyName | null;
}

/** manual policy and sticky-session map. */
export interface ManualConfig {
  /** Placement of unpinned keys; null = random for manual, delegate for sticky (`--assignment-mode`). */
  assignmentMode: AssignmentMode | null;
  /** A key idle this long is forgotten; 0 never (`--max-idle-secs`). */
  maxIdleSecs: number;
}

/** Health probing and worker lifecycle. */
export interface HealthConfig {
  /** Seconds between probes of a registered worker (`--health-check-interval-secs`). */
  intervalSecs: number;
  /** Per-probe timeout in seconds (`--health-check-timeout-secs`). */
  timeoutSecs: number;
  /** Consecutive failures that take a ready worker out (`--health-failure-threshold`). */
  failureThreshold: number;
  /** Consecutive successes that bring a worker back (`--health-success-threshold`). */
  successThreshold: number;
  /** Path probed on each worker (`--health-check-endpoint`). */
  endpoint: string;
  /** No periodic probes; workers start ready (`--disable-health-check`). */
  disabled: boolean;
  /** Remove workers that reach `failed` (`--remove-unhealthy-workers`). */
  removeUnhealthy: boolean;
  /** Seconds a removed worker drains before it leaves the registry (`--drain-settle-secs`). */
  drainSettleSecs: number;
  /** Seconds a starting worker may take to answer its first probe (`--worker-startup-timeout-secs`). */
  startupTimeoutSecs: number;
  /** Seconds between probes of a worker that never answered yet (`--worker-startup-check-interval`). */
  startupCheckIntervalSecs: number;
}

/** Per-worker circuit breaker. */
export interface CircuitBreakerConfig {
  /** Consecutive failures that open the breaker (`--cb-failure-threshold`). */
  failureThreshold: number;
  /** Consecutive half-open successes that close it (`--cb-success-threshold`). */
  successThreshold: number;
  /** Seconds open before trying half-open (`--cb-timeout-duration-secs`). */
  timeoutSecs: number;
  /** Failures further apart than this many seconds do not add up (`--cb-window-duration-secs`). */
  windowSecs: number;
  /** Never open (`--disable-circuit-breaker`); outcomes are still counted. */
  disabled: boolean;
}

/** Retries of failed attempts on other workers. */
export interface RetryConfig {
  /** Total attempts, the first included (`--retry-max-retries`). */
  maxAttempts: number;
  /** Delay before the first retry in ms (`--retry-initial-backoff-ms`). */
  initialBackoffMs: number;
  /** Cap on any delay in ms (`--retry-max-backoff-ms`). */
  maxBackoffMs: number;
  /** Growth of the delay per retry (`--retry-backoff-multiplier`). */
  multiplier: number;
  /** Relative jitter in [0, 1] (`--retry-jitter-factor`). */
  jitter: number;
  /** One attempt only (`--disable-retries`). */
  disabled: boolean;
}

/** Backend load polling and the overload veto. */
export interface LoadMonitorConfig {
  /** Seconds between polls; also the shed `Retry-After` (`--load-monitor-interval`). */
  intervalSecs: number;
  /** Poll only when something needs loads (`--disable-load-monitoring`). */
  disabled: boolean;
  /** Waiting requests at which a worker is vetoed; null is off (`--worker-overload-waiting-requests`). */
  overloadWaitingRequests: number | null;
  /** KV usage at which a worker is vetoed; null is off (`--worker-overload-token-usage`, `--worker-overload-protection`). */
  overloadTokenUsage: number | null;
}

/** Admission control in front of the inference routes. */
export interface AdmissionConfig {
  /** Requests served at once; -1 is unlimited (`--max-concurrent-requests`). */
  maxConcurrentRequests: number;
  /** Requests that may wait for a slot (`--queue-size`). */
  queueSize: number;
  /** Seconds a request may wait (`--queue-timeout-secs`). */
  queueTimeoutSecs: number;
  /**
   * Tokens the admission bucket regains per second, up to `maxConcurrentRequests`; null or 0:
   * none, the bucket is a concurrency cap (`--rate-limit-tokens-per-second`).
   */
  rateLimitTokensPerSecond: number | null;
}

/** Who a request's tenant is (SMG's tenant resolution). */
export interface TenantConfig {
  /** `tenant:key` pairs: a client whose bearer is `key` is `auth:<tenant>` (`--tenant-api-key`). */
  apiKeys: string[];
  /** Take the tenant from `headerName` when no key names it (`--trust-tenant-header`). */
  trustHeader: boolean;
  /** The trusted tenant header, lower-case (`--tenant-header-name`). */
  headerName: string;
}

/** Per-tenant LLM-token and request limits. */
export interface TenantRateLimitConfig {
  /** Enforce them (`--tenant-rate-limit-enabled`). */
  enabled: boolean;
  /** The YAML policy file; required when enabled (`--tenant-rate-limit-config`). */
  configPath: string | null;
  /**
   * `router`: each router counts alone, as SMG; `cluster` (ours, needs `--enable-mesh`): routers
   * share their counts over the mesh (`--tenant-rate-limit-scope`).
   */
  scope: "router" | "cluster";
  /** Cluster mode: a router publishes its counts this often, ms (`--tenant-rate-limit-sync-ms`). */
  syncMs: number;
}

/** TLS on the main port and toward workers (SMG's flags). */
export interface TlsConfig {
  /** Certificate chain (PEM) the main port serves; with the key, HTTPS (`--tls-cert-path`). */
  certPath: string | null;
  /** Its private key (PEM) (`--tls-key-path`). */
  keyPath: string | null;
  /** Certificate (PEM) the gateway presents to `https://` and `grpcs://` workers (`--client-cert-path`). */
  clientCertPath: string | null;
  /** Its private key (PEM) (`--client-key-path`). */
  clientKeyPath: string | null;
  /** CA certificates (PEM files) trusted for workers besides the system's (`--ca-cert-paths`). */
  caCertPaths: string[];
}

/** The whole gateway configuration. */
export interface GatewayConfig {
  /** Listen address (`--host`). */
  host: string;
  /** Listen port (`--port`). */
  port: number;
  /** Workers registered at start (`--worker-urls`). */
  workerUrls: string[];
  /**
   * Hosts workers may be registered at, on every path: IPs, CIDR blocks, names, `*.suffix`es;
   * empty allows every host but link-local ones and this gateway's own ports
   * (`--worker-host-allowlist`, ours).
   */
  workerHostAllowlist: string[];
  /** Routing policy (`--policy`). */
  policy: PolicyName;
  /** Metrics listen address (`--prometheus-host`). */
  prometheusHost: string;
  /** Metrics port (`--prometheus-port`). */
  prometheusPort: number;
  /** Bearer key required from clients and sent to startup workers (`--api-key`). */
  apiKey: string | null;
  /**
   * Origins browsers may call from, as `scheme://host[:port]`; empty allows any origin, method
   * and header (`--cors-allowed-origins`).
   */
  corsAllowedOrigins: string[];
  /**
   * Keys of the control-plane routes (workers, loads, cache flush, mesh status), each with a
   * role; empty leaves those routes to `--api-key` (`--control-plane-api-keys id:name:role:key`).
   */
  controlPlaneApiKeys: ControlPlaneKey[];
  /** Total time allowed for one request, stream included (`--request-timeout-secs`). */
  requestTimeoutSecs: number;
  /** The wait for a worker's response head, 0 none (`--stream-head-timeout-secs`). */
  streamHeadTimeoutSecs: number;
  /** Longest silence inside a worker's stream, 0 none (`--stream-idle-timeout-secs`). */
  streamIdleTimeoutSecs: number;
  /** Continuations of one broken stream on other workers, 0 none (`--stream-migration-limit`). */
  streamMigrationLimit: number;
  /** Largest request body in bytes (`--max-payload-size`). */
  maxPayloadSize: number;
  /** Seconds an idle pooled worker connection is kept (`--upstream-pool-idle-timeout-secs`). */
  upstreamPoolIdleTimeoutSecs: number;
  /** What serves the main port (`--http-server`): the own HTTP/1.1 front, or `Deno.serve`. */
  httpServer: "own" | "deno";
  /** Model directory (`--model-path`): its tokenizer when `--tokenizer-path` is not given. */
  modelPath: string | null;
  /** Tokenizer directory or `tokenizer.json` (`--tokenizer-path`). */
  tokenizerPath: string | null;
  /** Threads that encode prompts off the event loop, 0 none (`--tokenizer-threads`). */
  tokenizerThreads: number;
  /** Seconds in-flight requests get after SIGTERM (`--shutdown-grace-period-secs`). */
  shutdownGracePeriodSecs: number;
  /** Log level (`--log-level`). */
  logLevel: LogLevel;
  /** JSON log lines, logfmt otherwise (`--log-json`). */
  logJson: boolean;
  /** Headers a client request id is read from, first present wins (`--request-id-headers`). */
  requestIdHeaders: string[];
  /** Headers a routing key is read from (`--routing-key-headers`). */
  routingKeyHeaders: string[];
  /** Seed for the gateway's random choices; null seeds from the OS (`--random-seed`, ours). */
  randomSeed: number | null;
  /** Pin conversations on top of the policy, keyed by rid or routing key (`--routing-key-override`). */
  routingKeyOverride: boolean;
  /** Seconds between sweeps of idle keys and cache entries (`--eviction-interval`). */
  evictionIntervalSecs: number;
  /** Token depths at which prefix keys are taken, ascending (`--cache-boundaries`). */
  cacheBoundaries: number[];
  /** Prefill/decode disaggregation. */
  pd: PdConfig;
  /** cache_aware tuning. */
  cacheAware: CacheAwareConfig;
  /** least_load tuning. */
  leastLoad: LeastLoadConfig;
  /** prefix_hash tuning. */
  prefixHash: PrefixHashConfig;
  /** manual / sticky-session tuning. */
  manual: ManualConfig;
  /** Health probing. */
  health: HealthConfig;
  /** Circuit breaker. */
  circuitBreaker: CircuitBreakerConfig;
  /** Retries. */
  retry: RetryConfig;
  /** Load monitor. */
  loadMonitor: LoadMonitorConfig;
  /** Admission control. */
  admission: AdmissionConfig;
  /** The own front's limits on its clients. */
  front: FrontLimitsConfig;
  /** TLS on the main port and toward workers. */
  tls: TlsConfig;
  /** Tenant resolution. */
  tenants: TenantConfig;
  /** Per-tenant rate limits. */
  tenantRateLimit: TenantRateLimitConfig;
  /** HA mesh. */
  mesh: MeshConfig;
  /** Kubernetes service discovery. */
  discovery: DiscoveryConfig;
  /** OpenTelemetry tracing. */
  tracing: TracingConfig;
}

/** OpenTelemetry tracing (SMG's flags; the rest from `OTEL_*`, `lib/tracing/settings.ts`). */
export interface TracingConfig {
  /** Export spans (`--enable-trace`). */
  enabled: boolean;
  /** The collector; null: the `OTEL_*` endpoint, else localhost:4317 (`--otlp-traces-endpoint`). */
  endpoint: string | null;
}
