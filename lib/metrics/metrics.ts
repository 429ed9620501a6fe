/**
 * The gateway's Prometheus metrics, with SMG's `smg_*` names and labels, in one prom-client
 * registry per gateway (so tests can build many). Beyond upstream: a per-worker request counter
 * (`smg_worker_requests_total`) and a gateway-side time-to-first-token histogram for HTTP streams
 * (`smg_router_ttft_seconds`, which upstream records only for gRPC).
 *
 * Label children are cached by a joined key, since prom-client hashes label objects on every
 * call and these run per request.
 */

import client from "prom-client";

/** SMG's default duration buckets, 1 ms to 2 h. */
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

type Labeled<T> = { labels(...values: string[]): T };

/** A metric whose label children are memoised by their joined values. */
class Cached<T> {
  readonly #metric: Labeled<T>;
  readonly #children = new Map<string, T>();
  constructor(metric: Labeled<T>) {
    this.#metric = metric;
  }
  /** The child for these label values. */
  with(...values: string[]): T {
    const key = values.join("\u0000");
    let c = this.#children.get(key);
    if (!c) {
      c = this.#metric.labels(...values);
      if (this.#children.size > 10000) this.#children.clear();
      this.#children.set(key, c);
    }
    return c;
  }
}

/** Every metric the gateway exports. */
export class Metrics {
  /** The registry `/metrics` renders. */
  readonly registry = new client.Registry();

  /** smg_http_requests_total{method,path} */
  readonly httpRequests: Cached<client.Counter.Internal>;
  /** smg_http_request_duration_seconds{method,path} */
  readonly httpDuration: Cached<client.Histogram.Internal<string>>;
  /** smg_http_responses_total{path,status_code,error_code} */
  readonly httpResponses: Cached<client.Counter.Internal>;
  /** smg_http_connections_active */
  readonly httpActive: client.Gauge;
  /** smg_router_requests_total{router_type,backend_type,connection_mode,model,endpoint,streaming} */
  readonly routerRequests: Cached<client.Counter.Internal>;
  /** smg_router_request_duration_seconds{router_type,backend_type,connection_mode,model,endpoint} */
  readonly routerDuration: Cached<client.Histogram.Internal<string>>;
  /** smg_router_request_errors_total{...,error_type} */
  readonly routerErrors: Cached<client.Counter.Internal>;
  /** smg_router_upstream_responses_total{router_type,status_code,error_code} */
  readonly upstreamResponses: Cached<client.Counter.Internal>;
  /** smg_router_ttft_seconds{router_type,backend_type,model,endpoint} */
  readonly ttft: Cached<client.Histogram.Internal<string>>;
  /** smg_worker_requests_active{worker} */
  readonly workerActive: Cached<client.Gauge.Internal<string>>;
  /** smg_worker_requests_total{worker,outcome} (ours) */
  readonly workerRequests: Cached<client.Counter.Internal>;
  /** smg_worker_selection_total{worker_type,connection_mode,model,policy} */
  readonly selection: Cached<client.Counter.Internal>;
  /** smg_worker_errors_total{worker_type,connection_mode,error_type} */
  readonly workerErrors: Cached<client.Counter.Internal>;
  /** smg_worker_health{worker} */
  readonly workerHealth: client.Gauge;
  /** smg_worker_health_checks_total{worker_type,result} */
  readonly healthChecks: Cached<client.Counter.Internal>;
  /** smg_worker_pool_size{worker_type,connection_mode,model} */
  readonly poolSize: client.Gauge;
  /** smg_worker_cb_state{worker} */
  readonly cbState: client.Gauge;
  /** smg_worker_cb_transitions_total{worker,from,to} */
  readonly cbTransitions: client.Counter;
  /** smg_worker_cb_outcomes_total{worker,outcome} */
  readonly cbOutcomes: Cached<client.Counter.Internal>;
  /** smg_worker_cb_consecutive_failures{worker} */
  readonly cbFailures: Cached<client.Gauge.Internal<string>>;
  /** smg_worker_retries_total{worker_type,endpoint} */
  readonly retries: Cached<client.Counter.Internal>;
  /** smg_worker_retries_exhausted_total{worker_type,endpoint} */
  readonly retriesExhausted: Cached<client.Counter.Internal>;
  /** smg_worker_retry_backoff_seconds{attempt} */
  readonly retryBackoff: Cached<client.Histogram.Internal<string>>;
  /** smg_http_rate_limit_total{result} */
  readonly rateLimit: Cached<client.Counter.Internal>;
  /** smg_admission_queue_depth */
  readonly queueDepth: client.Gauge;
  /** smg_admission_inflight */
  readonly admissionInflight: client.Gauge;
  /** smg_admission_queue_rejected_total{reason} */
  readonly queueRejected: Cached<client.Counter.Internal>;
  /** smg_workers_overloaded{model} */
  readonly overloaded: client.Gauge;
  /** smg_worker_overload_shed_total{stage} */
  readonly overloadShed: Cached<client.Counter.Internal>;

  /** Registers every metric in a fresh registry. */
  constructor() {
    const r = [this.registry];
    const counter = (name: string, help: string, labelNames: string[]) =>
      new client.Counter({ name, help, labelNames, registers: r });
    const gauge = (name: string, help: string, labelNames: string[] = []) =>
      new client.Gauge({ name, help, labelNames, registers: r });
    const hist = (name: string, help: string, labelNames: string[], buckets = DURATION_BUCKETS) =>
      new client.Histogram({ name, help, labelNames, buckets, registers: r });
    const router = ["router_type", "backend_type", "connection_mode", "model", "endpoint"];

    this.httpRequests = new Cached(
      counter("smg_http_requests_total", "HTTP requests received", ["method", "path"]),
    );
    this.httpDuration = new Cached(
      hist("smg_http_request_duration_seconds", "Handler time until the response head", [
        "method",
        "path",
      ]),
    );
    this.httpResponses = new Cached(
      counter("smg_http_responses_total", "HTTP responses sent", [
        "path",
        "status_code",
        "error_code",
      ]),
    );
    this.httpActive = gauge("smg_http_connections_active", "HTTP requests in flight");
    this.routerRequests = new Cached(
      counter("smg_router_requests_total", "Inference requests routed", [...router, "streaming"]),
    );
    this.routerDuration = new Cached(
      hist(
        "smg_router_request_duration_seconds",
        "Routed request time (streams: to the head)",
        router,
      ),
    );
    this.routerErrors = new Cached(
      counter("smg_router_request_errors_total", "Requests that failed for good", [
        ...router,
        "error_type",
      ]),
    );
    this.upstreamResponses = new Cached(
      counter("smg_router_upstream_responses_total", "Worker responses, every attempt", [
        "router_type",
        "status_code",
        "error_code",
      ]),
    );
    this.ttft = new Cached(
      hist("smg_router_ttft_seconds", "Gateway-side time to the first streamed byte", [
        "router_type",
        "backend_type",
        "model",
        "endpoint",
      ]),
    );
    this.workerActive = new Cached(
      gauge("smg_worker_requests_active", "Requests in flight per worker", ["worker"]),
    );
    this.workerRequests = new Cached(
      counter("smg_worker_requests_total", "Attempts sent to each worker, by outcome", [
        "worker",
        "outcome",
      ]),
    );
    this.selection = new Cached(
      counter("smg_worker_selection_total", "Worker selections", [
        "worker_type",
        "connection_mode",
        "model",
        "policy",
      ]),
    );
    this.workerErrors = new Cached(
      counter("smg_worker_errors_total", "Worker 5xx and transport errors", [
        "worker_type",
        "connection_mode",
        "error_type",
      ]),
    );
    this.workerHealth = gauge("smg_worker_health", "1 when the worker is ready", ["worker"]);
    this.healthChecks = new Cached(
      counter("smg_worker_health_checks_total", "Health probes", ["worker_type", "result"]),
    );
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
    this.cbOutcomes = new Cached(
      counter("smg_worker_cb_outcomes_total", "Outcomes recorded by breakers", [
        "worker",
        "outcome",
      ]),
    );
    this.cbFailures = new Cached(
      gauge("smg_worker_cb_consecutive_failures", "Consecutive failures per worker", ["worker"]),
    );
    this.retries = new Cached(
      counter("smg_worker_retries_total", "Retried attempts", ["worker_type", "endpoint"]),
    );
    this.retriesExhausted = new Cached(
      counter("smg_worker_retries_exhausted_total", "Requests that used every attempt", [
        "worker_type",
        "endpoint",
      ]),
    );
    this.retryBackoff = new Cached(
      hist("smg_worker_retry_backoff_seconds", "Delay before a retry", ["attempt"]),
    );
    this.rateLimit = new Cached(
      counter("smg_http_rate_limit_total", "Admission decisions", ["result"]),
    );
    this.queueDepth = gauge("smg_admission_queue_depth", "Requests waiting for admission");
    this.admissionInflight = gauge("smg_admission_inflight", "Requests holding an admission slot");
    this.queueRejected = new Cached(
      counter("smg_admission_queue_rejected_total", "Requests shed by admission", ["reason"]),
    );
    this.overloaded = gauge("smg_workers_overloaded", "Workers vetoed by the overload guard", [
      "model",
    ]);
    this.overloadShed = new Cached(
      counter(
        "smg_worker_overload_shed_total",
        "Requests shed because every worker is overloaded",
        [
          "stage",
        ],
      ),
    );
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
