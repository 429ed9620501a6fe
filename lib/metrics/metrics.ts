/**
 * The gateway's Prometheus metrics, with SMG's `smg_*` names and labels, in one prom-client
 * registry per gateway (so tests can build many). Beyond upstream: a per-worker request counter
 * (`smg_worker_requests_total`) and a gateway-side time-to-first-token histogram for HTTP streams
 * (`smg_router_ttft_seconds`, which upstream records only for gRPC).
 *
 * Storage is `fast.ts` (label sets resolved once to series objects the hot path keeps);
 * prom-client renders the exposition.
 */

import client from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "./fast.ts";

/** SMG's default duration buckets, 1 ms to 2 h. */
/** Buckets for per-token times (1 ms to 2 s). */
/** Buckets of a difference of two shares in [-1, 1]. */
export const PREDICTION_ERROR_BUCKETS = [
  -0.9,
  -0.5,
  -0.25,
  -0.1,
  -0.05,
  -0.01,
  0.01,
  0.05,
  0.1,
  0.25,
  0.5,
  0.9,
];

const TOKEN_BUCKETS = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.02,
  0.035,
  0.05,
  0.075,
  0.1,
  0.15,
  0.25,
  0.5,
  1,
  2,
];

export const DURATION_BUCKETS = [
  0.001,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120,
  300,
  600,
  1800,
  3600,
  7200,
];

/** Every metric the gateway exports. */
export class Metrics {
  /** The registry `/metrics` renders. */
  readonly registry = new client.Registry();

  /** smg_http_requests_total{method,path} */
  readonly httpRequests: FastCounter;
  /** smg_http_request_duration_seconds{method,path} */
  readonly httpDuration: FastHistogram;
  /** smg_http_responses_total{path,status_code,error_code} */
  readonly httpResponses: FastCounter;
  /** smg_http_connections_active */
  readonly httpActive: FastGauge;
  /** smg_router_requests_total{router_type,backend_type,connection_mode,model,endpoint,streaming} */
  readonly routerRequests: FastCounter;
  /** smg_router_request_duration_seconds{router_type,backend_type,connection_mode,model,endpoint} */
  readonly routerDuration: FastHistogram;
  /** smg_router_request_errors_total{...,error_type} */
  readonly routerErrors: FastCounter;
  /** smg_router_upstream_responses_total{router_type,status_code,error_code} */
  readonly upstreamResponses: FastCounter;
  /** smg_router_upstream_send_retries_total: requests resent after a stale pooled connection */
  readonly upstreamSendRetries: FastCounter;
  /** smg_router_ttft_seconds{router_type,backend_type,model,endpoint} */
  readonly ttft: FastHistogram;
  /** smg_router_tpot_seconds{router_type,backend_type,model,endpoint} (gRPC streams) */
  readonly tpot: FastHistogram;
  /** smg_router_tokens_total{router_type,backend_type,model,endpoint,token_type} (gRPC) */
  readonly tokens: FastCounter;
  /** smg_worker_requests_active{worker} */
  readonly workerActive: FastGauge;
  /** smg_worker_requests_total{worker,outcome} (ours) */
  readonly workerRequests: FastCounter;
  /** smg_worker_selection_total{worker_type,connection_mode,model,policy} */
  readonly selection: FastCounter;
  /** smg_worker_errors_total{worker_type,connection_mode,error_type} */
  readonly workerErrors: FastCounter;
  /** smg_worker_health{worker} */
  readonly workerHealth: FastGauge;
  /** smg_worker_health_checks_total{worker_type,result} */
  readonly healthChecks: FastCounter;
  /** smg_worker_pool_size{worker_type,connection_mode,model} */
  readonly poolSize: FastGauge;
  /** smg_worker_cb_state{worker} */
  readonly cbState: FastGauge;
  /** smg_worker_cb_transitions_total{worker,from,to} */
  readonly cbTransitions: FastCounter;
  /** smg_worker_cb_outcomes_total{worker,outcome} */
  readonly cbOutcomes: FastCounter;
  /** smg_worker_cb_consecutive_failures{worker} */
  readonly cbFailures: FastGauge;
  /** smg_worker_retries_total{worker_type,endpoint} */
  readonly retries: FastCounter;
  /** smg_worker_retries_exhausted_total{worker_type,endpoint} */
  readonly retriesExhausted: FastCounter;
  /** smg_worker_retry_backoff_seconds{attempt} */
  readonly retryBackoff: FastHistogram;
  /** smg_http_rate_limit_total{result} */
  readonly rateLimit: FastCounter;
  /** smg_admission_queue_depth */
  readonly queueDepth: FastGauge;
  /** smg_admission_inflight */
  readonly admissionInflight: FastGauge;
  /** smg_admission_queue_rejected_total{reason} */
  readonly queueRejected: FastCounter;
  /** smg_workers_overloaded{model} */
  readonly overloaded: FastGauge;
  /** smg_worker_overload_shed_total{stage} */
  readonly overloadShed: FastCounter;
  /** smg_policy_decisions_total{policy,branch} (ours: every policy's branch) */
  readonly policyDecisions: FastCounter;
  /**
   * smg_policy_cache_prediction_error{policy} (ours): reported minus predicted cached share of
   * the prompt, per request whose policy predicted one (cache_aware).
   */
  readonly cachePredictionError: FastHistogram;
  /** smg_policy_cached_tokens_total{policy,source} (ours): predicted and reported cached tokens. */
  readonly cachedTokens: FastCounter;
  /** smg_manual_policy_branch_total{branch} (manual and sticky sessions) */
  readonly manualBranch: FastCounter;
  /** smg_consistent_hashing_policy_branch_total{branch} */
  readonly consistentHashingBranch: FastCounter;
  /** smg_prefix_hash_policy_branch_total{branch} */
  readonly prefixHashBranch: FastCounter;
  /** smg_manual_policy_cache_entries */
  readonly stickyEntries: FastGauge;
  /** smg_routing_key_source_total{source} */
  readonly routingKeySource: FastCounter;
  /** smg_worker_routing_keys_active{worker} */
  readonly routingKeysActive: FastGauge;
  /** smg_cache_aware_match_ratio{policy} (ours): matched share of each request's prefix */
  readonly matchRatio: FastHistogram;
  /** smg_cache_tree_chars{model} */
  readonly treeChars: FastGauge;
  /** smg_cache_tree_tokens{model} */
  readonly treeTokens: FastGauge;
  /** smg_cache_tree_tenants{model,tree} */
  readonly treeTenants: FastGauge;
  /** smg_cache_placement_entries{model} */
  readonly placements: FastGauge;

  /** Registers every metric in a fresh registry. */
  constructor() {
    const r = this.registry;
    const counter = (name: string, help: string, labelNames: string[]) =>
      new FastCounter(r, name, help, labelNames);
    const gauge = (name: string, help: string, labelNames: string[] = []) =>
      new FastGauge(r, name, help, labelNames);
    const hist = (name: string, help: string, labelNames: string[], buckets = DURATION_BUCKETS) =>
      new FastHistogram(r, name, help, labelNames, buckets);
    const router = ["router_type", "backend_type", "connection_mode", "model", "endpoint"];

    this.httpRequests = counter("smg_http_requests_total", "HTTP requests received", [
      "method",
      "path",
    ]);
    this.httpDuration = hist(
      "smg_http_request_duration_seconds",
      "Handler time until the response head",
      [
        "method",
        "path",
      ],
    );
    this.httpResponses = counter("smg_http_responses_total", "HTTP responses sent", [
      "path",
      "status_code",
      "error_code",
    ]);
    this.httpActive = gauge("smg_http_connections_active", "HTTP requests in flight");
    this.routerRequests = counter("smg_router_requests_total", "Inference requests routed", [
      ...router,
      "streaming",
    ]);
    this.routerDuration = hist(
      "smg_router_request_duration_seconds",
      "Routed request time (streams: to the head)",
      router,
    );
    this.routerErrors = counter(
      "smg_router_request_errors_total",
      "Requests that failed for good",
      [
        ...router,
        "error_type",
      ],
    );
    this.upstreamResponses = counter(
      "smg_router_upstream_responses_total",
      "Worker responses, every attempt",
      [
        "router_type",
        "status_code",
        "error_code",
      ],
    );
    this.upstreamSendRetries = counter(
      "smg_router_upstream_send_retries_total",
      "Requests resent once on a fresh connection after a pooled one turned out closed",
      [],
    );
    this.ttft = hist("smg_router_ttft_seconds", "Gateway-side time to the first streamed byte", [
      "router_type",
      "backend_type",
      "model",
      "endpoint",
    ]);
    this.tpot = hist(
      "smg_router_tpot_seconds",
      "Gateway-side time per output token after the first (gRPC streams)",
      ["router_type", "backend_type", "model", "endpoint"],
      TOKEN_BUCKETS,
    );
    this.tokens = counter("smg_router_tokens_total", "Prompt and completion tokens (gRPC)", [
      "router_type",
      "backend_type",
      "model",
      "endpoint",
      "token_type",
    ]);
    this.workerActive = gauge("smg_worker_requests_active", "Requests in flight per worker", [
      "worker",
    ]);
    this.workerRequests = counter(
      "smg_worker_requests_total",
      "Attempts sent to each worker, by outcome",
      [
        "worker",
        "outcome",
      ],
    );
    this.selection = counter("smg_worker_selection_total", "Worker selections", [
      "worker_type",
      "connection_mode",
      "model",
      "policy",
    ]);
    this.workerErrors = counter("smg_worker_errors_total", "Worker 5xx and transport errors", [
      "worker_type",
      "connection_mode",
      "error_type",
    ]);
    this.workerHealth = gauge("smg_worker_health", "1 when the worker is ready", ["worker"]);
    this.healthChecks = counter("smg_worker_health_checks_total", "Health probes", [
      "worker_type",
      "result",
    ]);
    this.poolSize = gauge("smg_worker_pool_size", "Registered workers", [
      "worker_type",
      "connection_mode",
      "model",
    ]);
    this.cbState = gauge("smg_worker_cb_state", "Breaker state: 0 closed, 1 open, 2 half-open", [
      "worker",
    ]);
    this.cbTransitions = counter("smg_worker_cb_transitions_total", "Breaker transitions", [
      "worker",
      "from",
      "to",
    ]);
    this.cbOutcomes = counter("smg_worker_cb_outcomes_total", "Outcomes recorded by breakers", [
      "worker",
      "outcome",
    ]);
    this.cbFailures = gauge(
      "smg_worker_cb_consecutive_failures",
      "Consecutive failures per worker",
      ["worker"],
    );
    this.retries = counter("smg_worker_retries_total", "Retried attempts", [
      "worker_type",
      "endpoint",
    ]);
    this.retriesExhausted = counter(
      "smg_worker_retries_exhausted_total",
      "Requests that used every attempt",
      [
        "worker_type",
        "endpoint",
      ],
    );
    this.retryBackoff = hist("smg_worker_retry_backoff_seconds", "Delay before a retry", [
      "attempt",
    ]);
    this.rateLimit = counter("smg_http_rate_limit_total", "Admission decisions", ["result"]);
    this.queueDepth = gauge("smg_admission_queue_depth", "Requests waiting for admission");
    this.admissionInflight = gauge("smg_admission_inflight", "Requests holding an admission slot");
    this.queueRejected = counter(
      "smg_admission_queue_rejected_total",
      "Requests shed by admission",
      ["reason"],
    );
    this.overloaded = gauge("smg_workers_overloaded", "Workers vetoed by the overload guard", [
      "model",
    ]);
    this.overloadShed = counter(
      "smg_worker_overload_shed_total",
      "Requests shed because every worker is overloaded",
      [
        "stage",
      ],
    );
    this.policyDecisions = counter(
      "smg_policy_decisions_total",
      "Routing decisions by policy and branch",
      [
        "policy",
        "branch",
      ],
    );
    this.cachePredictionError = hist(
      "smg_policy_cache_prediction_error",
      "Cached share of the prompt the worker reported minus the share the policy predicted",
      ["policy"],
      PREDICTION_ERROR_BUCKETS,
    );
    this.cachedTokens = counter(
      "smg_policy_cached_tokens_total",
      "Prompt tokens a policy predicted the worker to find cached, and what the worker reported",
      ["policy", "source"],
    );
    this.manualBranch = counter(
      "smg_manual_policy_branch_total",
      "manual / sticky-session decisions",
      [
        "branch",
      ],
    );
    this.consistentHashingBranch = counter(
      "smg_consistent_hashing_policy_branch_total",
      "consistent_hashing decisions",
      ["branch"],
    );
    this.prefixHashBranch = counter(
      "smg_prefix_hash_policy_branch_total",
      "prefix_hash decisions",
      [
        "branch",
      ],
    );
    this.stickyEntries = gauge("smg_manual_policy_cache_entries", "Keys held by the sticky map");
    this.routingKeySource = counter(
      "smg_routing_key_source_total",
      "Sticky keys by where they came from",
      [
        "source",
      ],
    );
    this.routingKeysActive = gauge(
      "smg_worker_routing_keys_active",
      "Distinct sticky keys in flight per worker",
      [
        "worker",
      ],
    );
    this.matchRatio = hist(
      "smg_cache_aware_match_ratio",
      "Share of each request's prefix found in the cache-aware tree",
      ["policy"],
      [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1],
    );
    this.treeChars = gauge("smg_cache_tree_chars", "Characters in the cache-aware string tree", [
      "model",
    ]);
    this.treeTokens = gauge("smg_cache_tree_tokens", "Tokens in the cache-aware token tree", [
      "model",
    ]);
    this.treeTenants = gauge("smg_cache_tree_tenants", "Workers present in a cache-aware tree", [
      "model",
      "tree",
    ]);
    this.placements = gauge("smg_cache_placement_entries", "Keys in the cache-aware hash index", [
      "model",
    ]);
    // Unlabelled gauges read 0 before their first change, rather than being absent.
    for (const g of [this.httpActive, this.queueDepth, this.admissionInflight]) g.with();
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
