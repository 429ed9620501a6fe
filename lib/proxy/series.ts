/**
 * The metric series the proxy updates, resolved once per worker, per (model, endpoint, policy,
 * connection mode, backend type) and per upstream status, so the hot path only bumps numbers.
 */

import type { ConnectionMode, Endpoint, RouteRequest } from "../core/types.ts";
import type { CounterSeries, GaugeSeries, HistogramSeries } from "../metrics/fast.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { Outcome } from "../workers/circuit_breaker.ts";
import type { Worker } from "../workers/worker.ts";

/** Metric series of one worker. */
export interface WorkerSeries {
  /** smg_worker_requests_active */
  active: GaugeSeries;
  /** smg_worker_requests_total by outcome */
  outcome: Record<Outcome, CounterSeries>;
  /** smg_worker_cb_consecutive_failures */
  cbFailures: GaugeSeries;
}

/** How requests reach workers: `regular` (one worker) or `pd` (a prefill/decode pair). */
export type BackendType = "regular" | "pd";

/** Metric series of one (model, endpoint, policy, connection mode, backend type). */
export interface RouteSeries {
  /** The `endpoint` label (SMG's: embeddings count as `other`). */
  endpoint: string;
  /** router_type, backend_type, connection_mode, model, endpoint */
  labels: [string, string, string, string, string];
  /** smg_router_requests_total, non-streaming and streaming */
  requests: [CounterSeries, CounterSeries];
  /** smg_router_request_duration_seconds */
  duration: HistogramSeries;
  /** smg_router_ttft_seconds */
  ttft: HistogramSeries;
  /** smg_router_tpot_seconds */
  tpot: HistogramSeries;
  /** smg_router_tokens_total, prompt then completion */
  tokens: [CounterSeries, CounterSeries];
  /** smg_worker_selection_total, one per worker an attempt picks (regular; or prefill, decode) */
  selection: CounterSeries[];
}

/** SMG's `endpoint` metric label. */
export function endpointLabel(e: Endpoint): string {
  return e === "embeddings" ? "other" : e;
}

/** SMG's `error_type` metric label for a status. */
export function errorType(status: number): string {
  if (status === 400 || status === 413 || status === 422) return "validation_error";
  if (status === 404) return "no_workers";
  if (status === 408 || status === 504) return "timeout";
  if (status >= 500) return "backend_error";
  return "internal_error";
}

/** Resolves and caches the proxy's metric series. */
export class ProxyMetrics {
  /** The metrics themselves, for rare series. */
  readonly m: Metrics;
  readonly #workers = new WeakMap<Worker, WorkerSeries>();
  readonly #routes = new Map<string, RouteSeries>();
  readonly #upstream = new Map<number, CounterSeries>();

  /** Series for `metrics`. */
  constructor(metrics: Metrics) {
    this.m = metrics;
  }

  /**
   * The series of a request's model and endpoint, routed to `connection` workers through
   * `backend` by `policy` (regular: the model's policy; PD: the prefill leg's, and `decode`'s).
   */
  route(
    rr: RouteRequest,
    connection: ConnectionMode,
    backend: BackendType,
    policy: string,
    decode = "",
  ): RouteSeries {
    const model = rr.model ?? "unknown";
    const key =
      `${model}\u0000${rr.endpoint}\u0000${connection}\u0000${backend}\u0000${policy}\u0000${decode}`;
    let s = this.#routes.get(key);
    if (!s) {
      const m = this.m;
      const ep = endpointLabel(rr.endpoint);
      const labels: RouteSeries["labels"] = [connection, backend, connection, model, ep];
      s = {
        endpoint: ep,
        labels,
        requests: [
          m.routerRequests.with(...labels, "false"),
          m.routerRequests.with(...labels, "true"),
        ],
        duration: m.routerDuration.with(...labels),
        ttft: m.ttft.with(connection, backend, model, ep),
        tpot: m.tpot.with(connection, backend, model, ep),
        tokens: [
          m.tokens.with(connection, backend, model, ep, "prompt"),
          m.tokens.with(connection, backend, model, ep, "completion"),
        ],
        selection: backend === "pd"
          ? [
            m.selection.with("prefill", connection, model, policy),
            m.selection.with("decode", connection, model, decode),
          ]
          : [m.selection.with("regular", connection, model, policy)],
      };
      if (this.#routes.size > 4096) this.#routes.clear();
      this.#routes.set(key, s);
    }
    return s;
  }

  /** Counts a request that failed for good. */
  error(s: RouteSeries, status: number): void {
    this.m.routerErrors.with(...s.labels, errorType(status)).inc();
  }

  /** The series of one worker. */
  worker(w: Worker): WorkerSeries {
    let s = this.#workers.get(w);
    if (!s) {
      const m = this.m;
      const outcome = (o: Outcome) => m.workerRequests.with(w.url, o);
      s = {
        active: m.workerActive.with(w.url),
        outcome: {
          success: outcome("success"),
          failure: outcome("failure"),
          neutral: outcome("neutral"),
        },
        cbFailures: m.cbFailures.with(w.url),
      };
      this.#workers.set(w, s);
    }
    return s;
  }

  /** Counts a worker response by status. */
  upstream(status: number): void {
    let s = this.#upstream.get(status);
    if (!s) {
      s = this.m.upstreamResponses.with("http", String(status), "");
      this.#upstream.set(status, s);
    }
    s.inc();
  }
}
