/**
 * The gateway's Prometheus metrics, with SMG's `smg_*` names and labels, in one prom-client
 * registry per gateway (so tests can build many). The families are declared by area:
 * requests (`request_metrics.ts`), workers (`worker_metrics.ts`), admission and overload
 * (`admission_metrics.ts`), policies (`policy_metrics.ts`), the process's memory
 * (`process_metrics.ts`, sampled at each render), tracing's export (`tracing_metrics.ts`);
 * `Metrics` holds them all, flat.
 *
 * Storage is `fast.ts` (label sets resolved once to series objects the hot path keeps);
 * prom-client renders the exposition.
 */

import client from "prom-client";
import { type AdmissionMetrics, admissionMetrics } from "./admission_metrics.ts";
import { familyBuilder } from "./families.ts";
import { type PolicyMetrics, policyMetrics } from "./policy_metrics.ts";
import { type ProcessMetrics, processMetrics, sampleProcess } from "./process_metrics.ts";
import { type RequestMetrics, requestMetrics } from "./request_metrics.ts";
import { type WorkerMetrics, workerMetrics } from "./worker_metrics.ts";
import { type TracingMetrics, tracingMetrics } from "./tracing_metrics.ts";

export { DURATION_BUCKETS } from "./families.ts";

/**
 * Every metric the gateway exports, by its field name (`metrics.httpRequests`, ...). Merged
 * with the class below, which assigns the fields from the areas' builders, so importers keep
 * one flat object.
 */
export interface Metrics
  extends
    RequestMetrics,
    WorkerMetrics,
    AdmissionMetrics,
    PolicyMetrics,
    ProcessMetrics,
    TracingMetrics {}

/** Every metric the gateway exports, registered in its own registry. */
export class Metrics {
  /** The registry `/metrics` renders. */
  readonly registry = new client.Registry();

  /** Registers every metric in a fresh registry, area by area, in exposition order. */
  constructor() {
    const f = familyBuilder(this.registry);
    Object.assign(
      this,
      requestMetrics(f),
      workerMetrics(f),
      admissionMetrics(f),
      policyMetrics(f),
      processMetrics(f),
      tracingMetrics(f),
    );
    // Unlabelled gauges read 0 before their first change, rather than being absent.
    for (const g of [this.httpActive, this.queueDepth, this.admissionInflight]) g.with();
  }

  /** The Prometheus text exposition, the process's memory read now. */
  render(): Promise<string> {
    sampleProcess(this);
    return this.registry.metrics();
  }
}
