/**
 * The metrics of requests as the gateway sees them: HTTP requests and responses on its port,
 * routed inference requests (count, duration, errors), worker responses and resends, and the
 * gateway-side time to first token, time per output token and token counts. Beyond SMG:
 * `smg_router_ttft_seconds` for HTTP streams too (SMG records it only for gRPC).
 */

import type { FastCounter, FastGauge, FastHistogram } from "./fast.ts";
import { type FamilyBuilder, TOKEN_BUCKETS } from "./families.ts";

/** HTTP and routed-request metrics. */
export interface RequestMetrics {
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
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function requestMetrics(f: FamilyBuilder): RequestMetrics {
  const router = ["router_type", "backend_type", "connection_mode", "model", "endpoint"];
  return {
    httpRequests: f.counter("smg_http_requests_total", "HTTP requests received", [
      "method",
      "path",
    ]),
    httpDuration: f.hist(
      "smg_http_request_duration_seconds",
      "Handler time until the response head",
      [
        "method",
        "path",
      ],
    ),
    httpResponses: f.counter("smg_http_responses_total", "HTTP responses sent", [
      "path",
      "status_code",
      "error_code",
    ]),
    httpActive: f.gauge("smg_http_connections_active", "HTTP requests in flight"),
    routerRequests: f.counter("smg_router_requests_total", "Inference requests routed", [
      ...router,
      "streaming",
    ]),
    routerDuration: f.hist(
      "smg_router_request_duration_seconds",
      "Routed request time (streams: to the head)",
      router,
    ),
    routerErrors: f.counter(
      "smg_router_request_errors_total",
      "Requests that failed for good",
      [
        ...router,
        "error_type",
      ],
    ),
    upstreamResponses: f.counter(
      "smg_router_upstream_responses_total",
      "Worker responses, every attempt",
      [
        "router_type",
        "status_code",
        "error_code",
      ],
    ),
    upstreamSendRetries: f.counter(
      "smg_router_upstream_send_retries_total",
      "Requests resent once on a fresh connection after a pooled one turned out closed",
      [],
    ),
    ttft: f.hist("smg_router_ttft_seconds", "Gateway-side time to the first streamed byte", [
      "router_type",
      "backend_type",
      "model",
      "endpoint",
    ]),
    tpot: f.hist(
      "smg_router_tpot_seconds",
      "Gateway-side time per output token after the first (gRPC streams)",
      ["router_type", "backend_type", "model", "endpoint"],
      TOKEN_BUCKETS,
    ),
    tokens: f.counter("smg_router_tokens_total", "Prompt and completion tokens (gRPC)", [
      "router_type",
      "backend_type",
      "model",
      "endpoint",
      "token_type",
    ]),
  };
}
