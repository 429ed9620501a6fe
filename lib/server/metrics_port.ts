/**
 * The metrics port's handler: `GET /metrics` (the Prometheus text), and the status page and its
 * snapshot, served as openly as the metrics are (this port has no keys). Anything else is 404.
 */

import type { Metrics } from "../metrics/metrics.ts";
import type { Dashboard } from "../dashboard/feature.ts";

/** What the metrics port answers from (the `Gateway`). */
export interface MetricsPortDeps {
  /** Refreshes the per-worker gauges and renders the Prometheus text. */
  renderMetrics(): Promise<string>;
  /** The metrics (their content type). */
  readonly metrics: Metrics;
  /** The status page. */
  readonly dashboard: Dashboard;
}

/** The metrics port's handler over `d`. */
export function metricsPortHandler(d: MetricsPortDeps): (req: Request) => Promise<Response> {
  return async (req) => {
    const url = new URL(req.url);
    if (req.method !== "GET") return new Response(null, { status: 404 });
    switch (url.pathname) {
      case "/metrics":
        return new Response(await d.renderMetrics(), {
          headers: { "content-type": d.metrics.registry.contentType },
        });
      case "/dashboard":
        return d.dashboard.page();
      case "/dashboard/snapshot":
        return d.dashboard.snapshot(url);
      default:
        return new Response(null, { status: 404 });
    }
  };
}
