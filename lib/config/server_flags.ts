/**
 * The gateway's server flags, declared once (see `flag.ts`): listen addresses, workers at start,
 * the policy, timeouts, logs, request-id and routing-key headers, and admission control.
 */

import { parseAllowEntry } from "../core/egress.ts";
import { badValue } from "../core/errors.ts";
import { LOG_LEVELS } from "../core/log.ts";
import { atLeast, listenPort, must, nonEmpty } from "./checks.ts";
import type { Check, Declarations, Flags, Kind } from "./flag.ts";
import { bool, choices, int, list, str } from "./kinds.ts";
import {
  type AdmissionConfig,
  POLICY_NAMES,
  type TenantConfig,
  type TenantRateLimitConfig,
} from "./types.ts";

/** Header names: a list, lower-cased. */
const headerNames: Kind<string[]> = {
  takes: "values",
  parse: (_, v) => v.map((h) => h.toLowerCase()),
  show: list.show,
};

/** Each header name is a valid HTTP token. */
const validHeaders: Check<string[]> = (flag, hs) => {
  for (const h of hs) {
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(h)) {
      throw badValue(flag, h, "expected an HTTP header name");
    }
  }
  return hs;
};

/** Host entries: values up to the next flag, repeats adding up, commas splitting too. */
const hostList: Kind<string[]> = {
  takes: "values",
  parse: (_, v) => v.flatMap((x) => x.split(",")).map((x) => x.trim()).filter((x) => x !== ""),
  show: list.show,
};

/** Each entry is an IP, a CIDR block, a host name or `*.suffix`. */
const validAllowlist: Check<string[]> = (flag, entries) => {
  for (const e of entries) {
    if (!parseAllowEntry(e)) {
      throw badValue(
        flag,
        e,
        "expected an IP address, a CIDR block (10.0.0.0/8, fd00::/8), " +
          "a host name or *.domain",
      );
    }
  }
  return entries;
};

/** The server's top-level fields, in --help order. */
export const SERVER_FLAGS = {
  host: { name: "host", kind: str, default: "0.0.0.0", help: "address to listen on" },
  port: { name: "port", kind: int, default: 30000, help: "port to listen on", check: listenPort },
  workerUrls: {
    name: "worker-urls",
    kind: list,
    default: [],
    help: "worker base URLs registered at start",
    // Checked in validate.ts, with the PD workers: the same URL rules apply to both.
  },
  workerHostAllowlist: {
    name: "worker-host-allowlist",
    kind: hostList,
    default: [],
    help: "hosts, *.suffixes and CIDRs workers may be registered at, on every path (link-local " +
      "and this gateway's own ports are refused even without it)",
    check: validAllowlist,
  },
  policy: {
    name: "policy",
    kind: choices(POLICY_NAMES),
    default: "cache_aware",
    help: "routing policy",
    // SMG's Rust CLI accepts it and then routes at random; its Python launcher refuses it.
    check: must(
      (v) => v !== "bucket",
      "bucket routes the PD prefill leg only; use --prefill-policy bucket with --pd-disaggregation",
    ),
  },
  prometheusHost: {
    name: "prometheus-host",
    kind: str,
    default: "0.0.0.0",
    help: "metrics listen address",
  },
  prometheusPort: {
    name: "prometheus-port",
    kind: int,
    default: 29000,
    help: "metrics port (GET /metrics)",
    check: listenPort,
  },
  apiKey: {
    name: "api-key",
    kind: str,
    default: null,
    help: "bearer key required from clients; also sent to startup workers",
    check: nonEmpty,
  },
  requestTimeoutSecs: {
    name: "request-timeout-secs",
    kind: int,
    default: 1800,
    help: "total time for one request, stream included",
    check: atLeast(1),
  },
  streamHeadTimeoutSecs: {
    name: "stream-head-timeout-secs",
    kind: int,
    default: 30,
    help:
      "wait for a worker's response head before another worker is tried (a whole answer's adds a quarter second per max_tokens); 0 is none",
    check: atLeast(0),
  },
  streamIdleTimeoutSecs: {
    name: "stream-idle-timeout-secs",
    kind: int,
    default: 20,
    help:
      "longest silence inside a worker's stream (its first piece waits longer while the worker answers others); past it the stream is retried or continued and the worker excluded until it shows progress; 0 is none",
    check: atLeast(0),
  },
  streamMigrationLimit: {
    name: "stream-migration-limit",
    kind: int,
    default: 3,
    help:
      "times one stream may be continued on another worker after its worker broke mid-way (chat and completions; see the docs for which); 0 ends it with an error event instead",
    check: atLeast(0),
  },
  maxPayloadSize: {
    name: "max-payload-size",
    kind: int,
    default: 536870912,
    help: "largest request body in bytes",
    check: atLeast(1),
  },
  upstreamPoolIdleTimeoutSecs: {
    name: "upstream-pool-idle-timeout-secs",
    kind: int,
    default: 3,
    help: "idle worker connections close after this",
    check: atLeast(0),
  },
  modelPath: {
    name: "model-path",
    kind: str,
    default: null,
    help: "model directory; its tokenizer serves grpc:// workers (the gateway tokenizes)",
  },
  tokenizerPath: {
    name: "tokenizer-path",
    kind: str,
    default: null,
    help: "tokenizer directory or tokenizer.json (default: --model-path)",
  },
  tokenizerThreads: {
    name: "tokenizer-threads",
    kind: int,
    default: 1,
    help:
      "threads that tokenize prompts off the event loop (for gRPC workers and KV-event routing); 0: on it",
    check: atLeast(0),
  },
  httpServer: {
    name: "http-server",
    kind: choices(["own", "deno"]),
    default: "own",
    help: "main port server: own (HTTP/1.1, cheapest) or deno (Deno.serve, also h2c)",
  },
  shutdownGracePeriodSecs: {
    name: "shutdown-grace-period-secs",
    kind: int,
    default: 180,
    help: "time in-flight requests get after SIGTERM",
    check: atLeast(0),
  },
  logLevel: {
    name: "log-level",
    kind: choices(LOG_LEVELS),
    default: "info",
    help: "log level (RUST_LOG adds per-module filters)",
  },
  logJson: {
    name: "log-json",
    kind: bool,
    default: false,
    help: "JSON log lines instead of logfmt",
  },
  requestIdHeaders: {
    name: "request-id-headers",
    kind: headerNames,
    default: ["x-request-id", "x-correlation-id", "x-trace-id", "request-id"],
    help: "headers a client request id is read from",
    check: validHeaders,
  },
  routingKeyHeaders: {
    name: "routing-key-headers",
    kind: headerNames,
    default: ["x-smg-routing-key"],
    help: "headers a routing key is read from",
    check: validHeaders,
  },
  randomSeed: {
    name: "random-seed",
    kind: int,
    default: null,
    help: "seed for routing randomness (reproducible runs)",
  },
} satisfies Partial<Declarations>;

/** Admission control, in --help order. */
export const ADMISSION_FLAGS: Flags<AdmissionConfig> = {
  maxConcurrentRequests: {
    name: "max-concurrent-requests",
    kind: int,
    default: -1,
    help: "requests served at once; -1 is unlimited",
    check: must((v) => v === -1 || v >= 1, "use -1 (off) or >= 1"),
  },
  queueSize: {
    name: "queue-size",
    kind: int,
    default: 100,
    help: "requests that may wait for a slot",
    check: atLeast(0),
  },
  queueTimeoutSecs: {
    name: "queue-timeout-secs",
    kind: int,
    default: 60,
    help: "seconds a request may wait for a slot",
    check: atLeast(0),
  },
  rateLimitTokensPerSecond: {
    name: "rate-limit-tokens-per-second",
    kind: int,
    default: null,
    help: "admission tokens regained per second, up to --max-concurrent-requests; 0 is none",
    check: atLeast(0),
  },
};

/** `tenant:key` pairs: a tenant id and a key, both non-empty and unpadded. */
const tenantKeyPairs: Check<string[]> = (flag, pairs) => {
  for (const p of pairs) {
    const at = p.indexOf(":");
    const id = at < 0 ? "" : p.slice(0, at);
    const key = at < 0 ? "" : p.slice(at + 1);
    if (id.trim() === "" || key.trim() === "") {
      throw badValue(flag, at < 0 ? "***" : `${id}:***`, "expected tenant:key, both non-empty");
    }
    if (id.trim() !== id || key.trim() !== key) {
      throw badValue(flag, `${id}:***`, "the tenant id and key must not have surrounding spaces");
    }
  }
  return pairs;
};

/** Tenant resolution, in --help order. */
export const TENANT_FLAGS: Flags<TenantConfig> = {
  apiKeys: {
    name: "tenant-api-key",
    kind: list,
    default: [],
    help: "tenant:key (repeatable): a client presenting this bearer key is tenant auth:<tenant>",
    check: tenantKeyPairs,
  },
  trustHeader: {
    name: "trust-tenant-header",
    kind: bool,
    default: false,
    help: "take the tenant from --tenant-header-name when no key names it",
  },
  headerName: {
    name: "tenant-header-name",
    kind: {
      takes: "value",
      parse: (_, v) => v.toLowerCase(),
      show: str.show,
    },
    default: "x-smg-tenant-id",
    help: "the trusted tenant header",
    check: (flag, v) => validHeaders(flag, [v])[0],
  },
};

/** Per-tenant rate limits, in --help order. */
export const TENANT_RATE_LIMIT_FLAGS: Flags<TenantRateLimitConfig> = {
  enabled: {
    name: "tenant-rate-limit-enabled",
    kind: bool,
    default: false,
    help: "enforce per-tenant LLM-token and request limits (--tenant-rate-limit-config)",
  },
  configPath: {
    name: "tenant-rate-limit-config",
    kind: str,
    default: null,
    help: "YAML: default_policy and tenants, tokens and requests per minute, model rules",
    check: nonEmpty,
  },
  scope: {
    name: "tenant-rate-limit-scope",
    kind: choices(["router", "cluster"]),
    default: "router",
    help: "router: each router counts alone; cluster: routers share counts over the mesh",
  },
  syncMs: {
    name: "tenant-rate-limit-sync-ms",
    kind: int,
    default: 100,
    help: "cluster scope: how often a router publishes its counts to the mesh",
    check: atLeast(10),
  },
};
