/**
 * The metrics of workers: requests in flight and sent per worker (`smg_worker_requests_total`
 * is ours), selections, errors, health and its checks, pool size, circuit breakers and retries,
 * and (ours) progress deadline misses and stream continuations.
 */

import type { FastCounter, FastGauge, FastHistogram } from "./fast.ts";
import type { FamilyBuilder } from "./families.ts";

/** Per-worker metrics. */
export interface WorkerMetrics {
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
  /** smg_worker_progress_deadline_misses_total{worker,phase} (ours) */
  readonly progressMisses: FastCounter;
  /** smg_stream_continuations_total{worker,result} (ours) */
  readonly continuations: FastCounter;
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function workerMetrics(f: FamilyBuilder): WorkerMetrics {
  return {
    workerActive: f.gauge("smg_worker_requests_active", "Requests in flight per worker", [
      "worker",
    ]),
    workerRequests: f.counter(
      "smg_worker_requests_total",
      "Attempts sent to each worker, by outcome",
      [
        "worker",
        "outcome",
      ],
    ),
    selection: f.counter("smg_worker_selection_total", "Worker selections", [
      "worker_type",
      "connection_mode",
      "model",
      "policy",
    ]),
    workerErrors: f.counter("smg_worker_errors_total", "Worker 5xx and transport errors", [
      "worker_type",
      "connection_mode",
      "error_type",
    ]),
    workerHealth: f.gauge("smg_worker_health", "1 when the worker is ready", ["worker"]),
    healthChecks: f.counter("smg_worker_health_checks_total", "Health probes", [
      "worker_type",
      "result",
    ]),
    poolSize: f.gauge("smg_worker_pool_size", "Registered workers", [
      "worker_type",
      "connection_mode",
      "model",
    ]),
    cbState: f.gauge("smg_worker_cb_state", "Breaker state: 0 closed, 1 open, 2 half-open", [
      "worker",
    ]),
    cbTransitions: f.counter("smg_worker_cb_transitions_total", "Breaker transitions", [
      "worker",
      "from",
      "to",
    ]),
    cbOutcomes: f.counter("smg_worker_cb_outcomes_total", "Outcomes recorded by breakers", [
      "worker",
      "outcome",
    ]),
    cbFailures: f.gauge(
      "smg_worker_cb_consecutive_failures",
      "Consecutive failures per worker",
      ["worker"],
    ),
    retries: f.counter("smg_worker_retries_total", "Retried attempts", [
      "worker_type",
      "endpoint",
    ]),
    retriesExhausted: f.counter(
      "smg_worker_retries_exhausted_total",
      "Requests that used every attempt",
      [
        "worker_type",
        "endpoint",
      ],
    ),
    retryBackoff: f.hist("smg_worker_retry_backoff_seconds", "Delay before a retry", [
      "attempt",
    ]),
    progressMisses: f.counter(
      "smg_worker_progress_deadline_misses_total",
      "Attempts given up on for a worker's silence, by what it held: head, first_piece, idle",
      ["worker", "phase"],
    ),
    continuations: f.counter(
      "smg_stream_continuations_total",
      "Streams broken mid-way (by the worker that broke them), by how they went on: continued, completed, blocked, limit, failed, off",
      ["worker", "result"],
    ),
  };
}
