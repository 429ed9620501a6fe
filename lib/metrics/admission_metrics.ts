/**
 * The metrics of admission and overload: the own front's refusals of clients past its limits,
 * rate-limit decisions, the admission queue and its rejections, workers vetoed by the overload
 * guard and requests shed because of it.
 */

import type { FastCounter, FastGauge } from "./fast.ts";
import type { FamilyBuilder } from "./families.ts";

/** Admission and overload metrics. */
export interface AdmissionMetrics {
  /** smg_http_front_rejected_total{reason} */
  readonly frontRejected: FastCounter;
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
  /** smg_tenant_rate_limit_total{result} */
  readonly tenantRateLimit: FastCounter;
  /** smg_tenant_rate_limit_reservations */
  readonly tenantReservations: FastGauge;
  /** smg_tenant_rate_limit_tokens_total{kind} */
  readonly tenantTokens: FastCounter;
  /** smg_tenant_rate_limit_cluster_total{kind} */
  readonly tenantCluster: FastCounter;
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function admissionMetrics(f: FamilyBuilder): AdmissionMetrics {
  return {
    frontRejected: f.counter(
      "smg_http_front_rejected_total",
      "Connections refused and requests cut by the own front's client limits",
      ["reason"],
    ),
    rateLimit: f.counter("smg_http_rate_limit_total", "Admission decisions", ["result"]),
    queueDepth: f.gauge("smg_admission_queue_depth", "Requests waiting for admission"),
    admissionInflight: f.gauge("smg_admission_inflight", "Requests holding an admission slot"),
    queueRejected: f.counter(
      "smg_admission_queue_rejected_total",
      "Requests shed by admission",
      ["reason"],
    ),
    overloaded: f.gauge("smg_workers_overloaded", "Workers vetoed by the overload guard", [
      "model",
    ]),
    overloadShed: f.counter(
      "smg_worker_overload_shed_total",
      "Requests shed because every worker is overloaded",
      [
        "stage",
      ],
    ),
    tenantRateLimit: f.counter(
      "smg_tenant_rate_limit_total",
      "Tenant rate-limit decisions (allowed, rejected), once per request",
      ["result"],
    ),
    tenantReservations: f.gauge(
      "smg_tenant_rate_limit_reservations",
      "Tenant rate-limit reservations not yet settled",
    ),
    tenantTokens: f.counter(
      "smg_tenant_rate_limit_tokens_total",
      "LLM tokens reserved (the prompt estimate) and settled (what requests were charged)",
      ["kind"],
    ),
    tenantCluster: f.counter(
      "smg_tenant_rate_limit_cluster_total",
      "Cluster mode: peers' tokens and requests taken here, and shards published",
      ["kind"],
    ),
  };
}
