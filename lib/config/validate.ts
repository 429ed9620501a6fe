/**
 * Start-up validation: every rule SMG enforces for the flags in scope, plus the ranges a value
 * needs to make sense. The first violation throws a one-line `ConfigError`; main exits 2.
 * Otherwise the result is a normalised copy (worker URLs without a trailing slash, IPv6 mesh
 * hosts in brackets, ...).
 */

import { atLeast } from "./checks.ts";
import { badValue } from "../core/errors.ts";
import type { GatewayConfig } from "./config.ts";
import { validateMesh } from "./validate_mesh.ts";
import { validateDiscovery } from "./validate_discovery.ts";

const WORKER_SCHEMES = new Set(["http:", "https:", "grpc:", "grpcs:"]);

/** Whether a (normalized) worker URL is a gRPC worker's. */
export function isGrpcUrl(url: string): boolean {
  return url.startsWith("grpc://") || url.startsWith("grpcs://");
}

/**
 * Checks a worker URL (http(s) or grpc(s) with a host) and returns its canonical form, no
 * trailing slash. A gRPC worker has a port and no path.
 */
export function normalizeWorkerUrl(raw: string, flag = "--worker-urls"): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw badValue(flag, raw, "expected an absolute URL such as http://127.0.0.1:8000");
  }
  if (!WORKER_SCHEMES.has(u.protocol) || !u.hostname) {
    throw badValue(flag, raw, "expected an http://, https://, grpc:// or grpcs:// URL with a host");
  }
  if (u.search || u.hash) throw badValue(flag, raw, "a worker URL has no query or fragment");
  const grpc = u.protocol === "grpc:" || u.protocol === "grpcs:";
  if (grpc && (!u.port || u.pathname.replace(/\/+$/, "") !== "")) {
    throw badValue(flag, raw, "a gRPC worker URL is grpc://host:port, with no path");
  }
  // Scheme and host are case-insensitive and a default port is implied: one worker, one URL.
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
}

function port(flag: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > 65535) {
    throw badValue(flag, v, "allowed: 0..65535 (0 picks a free port)");
  }
}

/** The normalised copy of `config`; throws the first problem found. `config` is not changed. */
export function validateConfig(config: GatewayConfig): GatewayConfig {
  const c = structuredClone(config);
  port("--port", c.port);
  port("--prometheus-port", c.prometheusPort);
  c.workerUrls = c.workerUrls.map((u) => normalizeWorkerUrl(u));
  const seen = new Set<string>();
  for (const u of c.workerUrls) {
    if (seen.has(u)) throw badValue("--worker-urls", u, "each worker URL may appear once");
    seen.add(u);
  }
  const grpcUrl = c.workerUrls.find(isGrpcUrl);
  if (grpcUrl && c.tokenizerPath === null && c.modelPath === null) {
    throw badValue(
      "--worker-urls",
      grpcUrl,
      "gRPC workers take token ids: give --model-path or --tokenizer-path",
    );
  }
  if (c.apiKey !== null && c.apiKey.trim() === "") {
    throw badValue("--api-key", c.apiKey, "must not be empty");
  }
  atLeast("--request-timeout-secs", c.requestTimeoutSecs, 1);
  atLeast("--max-payload-size", c.maxPayloadSize, 1);
  atLeast("--upstream-pool-idle-timeout-secs", c.upstreamPoolIdleTimeoutSecs, 0);
  atLeast("--shutdown-grace-period-secs", c.shutdownGracePeriodSecs, 0);
  for (
    const [flag, headers] of [
      ["--request-id-headers", c.requestIdHeaders],
      ["--routing-key-headers", c.routingKeyHeaders],
    ] as const
  ) {
    for (const h of headers) {
      if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(h)) {
        throw badValue(flag, h, "expected an HTTP header name");
      }
    }
  }

  const h = c.health;
  atLeast("--health-check-interval-secs", h.intervalSecs, 1);
  atLeast("--health-check-timeout-secs", h.timeoutSecs, 1);
  atLeast("--health-failure-threshold", h.failureThreshold, 1);
  atLeast("--health-success-threshold", h.successThreshold, 1);
  if (!h.endpoint.startsWith("/")) {
    throw badValue("--health-check-endpoint", h.endpoint, "must start with /");
  }
  atLeast("--drain-settle-secs", h.drainSettleSecs, 0);
  atLeast("--worker-startup-timeout-secs", h.startupTimeoutSecs, 1);
  atLeast("--worker-startup-check-interval", h.startupCheckIntervalSecs, 1);

  const cb = c.circuitBreaker;
  atLeast("--cb-failure-threshold", cb.failureThreshold, 1);
  atLeast("--cb-success-threshold", cb.successThreshold, 1);
  atLeast("--cb-timeout-duration-secs", cb.timeoutSecs, 1);
  atLeast("--cb-window-duration-secs", cb.windowSecs, 1);

  const r = c.retry;
  atLeast("--retry-max-retries", r.maxAttempts, 1);
  atLeast("--retry-initial-backoff-ms", r.initialBackoffMs, 0);
  atLeast("--retry-max-backoff-ms", r.maxBackoffMs, 0);
  atLeast("--retry-backoff-multiplier", r.multiplier, 1);
  if (!(r.jitter >= 0 && r.jitter <= 1)) {
    throw badValue("--retry-jitter-factor", r.jitter, "allowed: 0..1");
  }

  const m = c.loadMonitor;
  atLeast("--load-monitor-interval", m.intervalSecs, 1);
  if (m.overloadWaitingRequests !== null) {
    atLeast("--worker-overload-waiting-requests", m.overloadWaitingRequests, 1);
  }
  if (m.overloadTokenUsage !== null && !(m.overloadTokenUsage > 0 && m.overloadTokenUsage <= 1)) {
    throw badValue("--worker-overload-token-usage", m.overloadTokenUsage, "allowed: (0, 1]");
  }

  validatePolicies(c);
  validatePd(c);
  validateMesh(c);
  validateDiscovery(c);

  const a = c.admission;
  if (a.maxConcurrentRequests !== -1 && a.maxConcurrentRequests < 1) {
    throw badValue("--max-concurrent-requests", a.maxConcurrentRequests, "use -1 (off) or >= 1");
  }
  atLeast("--queue-size", a.queueSize, 0);
  atLeast("--queue-timeout-secs", a.queueTimeoutSecs, 0);
  if (a.queueSize > 0 && a.queueTimeoutSecs === 0) {
    throw badValue("--queue-timeout-secs", 0, "must be >= 1 while --queue-size is above 0");
  }
  return c;
}

/** SMG's checks of the policy flags. */
function validatePolicies(c: GatewayConfig): void {
  // SMG's Rust CLI accepts it and then routes at random; its Python launcher refuses it.
  if (c.policy === "bucket") {
    throw badValue(
      "--policy",
      "bucket",
      "bucket routes the PD prefill leg only; use --prefill-policy bucket with --pd-disaggregation",
    );
  }
  const b = c.cacheBoundaries;
  if (b.length > 0 && b[0] <= 0) {
    throw badValue("--cache-boundaries", b.join(","), "Boundaries must be > 0");
  }
  for (let i = 1; i < b.length; i++) {
    if (b[i] <= b[i - 1]) {
      throw badValue("--cache-boundaries", b.join(","), "Boundaries must be strictly ascending");
    }
  }
  atLeast("--eviction-interval", c.evictionIntervalSecs, 0);
  atLeast("--max-idle-secs", c.manual.maxIdleSecs, 0);
  const l = c.leastLoad;
  if (!(Number.isFinite(l.kvPressureWeight) && l.kvPressureWeight >= 0)) {
    throw badValue(
      "--least-load-kv-pressure-weight",
      l.kvPressureWeight,
      "Must be finite and >= 0.0",
    );
  }
  if (!(Number.isFinite(l.defaultThroughput) && l.defaultThroughput > 0)) {
    throw badValue(
      "--least-load-default-throughput",
      l.defaultThroughput,
      "Must be finite and > 0.0",
    );
  }
  atLeast("--least-load-mean-prefill-tokens", l.meanPrefillTokens, 1);
  atLeast("--least-load-max-waiting-requests", l.maxWaitingRequests, 0);
  const p = c.prefixHash;
  atLeast("--prefix-token-count", p.prefixTokenCount, 1);
  atLeast("--prefix-hash-load-factor", p.loadFactor, 1);
  atLeast("--prefix-hash-balance-abs-threshold", p.balanceAbsThreshold, 0);
  const ca = c.cacheAware;
  if (!(ca.cacheThreshold >= 0 && ca.cacheThreshold <= 1)) {
    throw badValue("--cache-threshold", ca.cacheThreshold, "Must be between 0.0 and 1.0");
  }
  atLeast("--balance-abs-threshold", ca.balanceAbsThreshold, 0);
  atLeast("--balance-rel-threshold", ca.balanceRelThreshold, 1);
  for (
    const [flag, v] of [
      ["--balance-token-usage-threshold", ca.balanceTokenUsageThreshold],
      ["--overload-token-usage-threshold", ca.overloadTokenUsageThreshold],
    ] as const
  ) {
    if (!(v > 0)) throw badValue(flag, v, "Must be > 0.0 (use >= 1.0 to disable)");
  }
  if (!(Number.isFinite(ca.overlapDecay) && ca.overlapDecay >= 0)) {
    throw badValue("--overlap-decay", ca.overlapDecay, "Must be finite and >= 0.0 (0.0 disables)");
  }
  if (!(Number.isFinite(ca.selectionTemperature) && ca.selectionTemperature >= 0)) {
    throw badValue(
      "--selection-temperature",
      ca.selectionTemperature,
      "Must be finite and >= 0.0 (0.0 is argmax)",
    );
  }
  atLeast("--max-tree-size", ca.maxTreeSize, 1);
  atLeast("--block-size", ca.blockSize, 1);
  atLeast("--cache-ttl-secs", ca.cacheTtlSecs, 1);
  if (ca.cacheIndex === "hash" && c.cacheBoundaries.length === 0) {
    throw badValue("--cache-index", "hash", "cache_index=hash requires non-empty cache_boundaries");
  }
  if (c.policy === "cache_aware") atLeast("--eviction-interval", c.evictionIntervalSecs, 1);
  // SMG refuses power_of_two with fewer than 2 workers; with none at start (all added through
  // POST /workers) there is nothing to refuse yet.
  if (c.policy === "power_of_two" && c.workerUrls.length === 1) {
    throw badValue("--policy", "power_of_two", "Power-of-two policy requires at least 2 workers");
  }
}

/** PD flags: legs only with `--pd-disaggregation`, never mixed with regular workers, no decode bucket. */
function validatePd(c: GatewayConfig): void {
  const pd = c.pd;
  if (!pd.enabled) {
    if (pd.prefill.length > 0 || pd.decode.length > 0) {
      throw badValue(
        "--prefill/--decode",
        "",
        "prefill and decode workers need --pd-disaggregation",
      );
    }
    return;
  }
  if (c.workerUrls.length > 0) {
    throw badValue(
      "--worker-urls",
      c.workerUrls.join(" "),
      "use --prefill and --decode with --pd-disaggregation",
    );
  }
  pd.prefill = pd.prefill.map((p) => ({ ...p, url: normalizeWorkerUrl(p.url, "--prefill") }));
  pd.decode = pd.decode.map((u) => normalizeWorkerUrl(u, "--decode"));
  const all = [...pd.prefill.map((p) => p.url), ...pd.decode];
  const grpcLegs = all.filter(isGrpcUrl);
  if (grpcLegs.length > 0 && grpcLegs.length < all.length) {
    throw badValue(
      "--prefill/--decode",
      all.join(" "),
      "a PD fleet speaks one protocol: all grpc:// or all http(s)://",
    );
  }
  if (grpcLegs.length > 0 && c.tokenizerPath === null && c.modelPath === null) {
    throw badValue(
      "--prefill/--decode",
      grpcLegs[0],
      "gRPC workers take token ids: give --model-path or --tokenizer-path",
    );
  }
  if (new Set(all).size !== all.length) {
    throw badValue("--prefill/--decode", all.join(" "), "each worker URL may appear once");
  }
  if (pd.decodePolicy === "bucket") {
    throw badValue(
      "--decode-policy",
      "bucket",
      "Decode policy should not be allowed to be bucket; bucket routes the prefill leg (--prefill-policy bucket)",
    );
  }
  if (pd.prefillPolicy === "power_of_two" && pd.prefill.length === 1) {
    throw badValue(
      "--prefill-policy",
      "power_of_two",
      "Power-of-two policy for prefill requires at least 2 prefill workers",
    );
  }
  if (pd.decodePolicy === "power_of_two" && pd.decode.length === 1) {
    throw badValue(
      "--decode-policy",
      "power_of_two",
      "Power-of-two policy for decode requires at least 2 decode workers",
    );
  }
}
