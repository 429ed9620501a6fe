/**
 * Probes and info: `/readiness`, `/v1/models` (from the registry), the pass-throughs to the
 * first ready worker (`/health_generate`, `/get_server_info`, `/get_model_info`), and the
 * fan-outs `/get_loads` and `/flush_cache`, all through the workers' `WorkerControl`.
 */

import type { Clock } from "../core/clock.ts";
import { errorResponse, GatewayError } from "../core/errors.ts";
import type { WorkerControl } from "../workers/control.ts";
import { tryJson } from "../workers/http.ts";
import { usedTokensOrUnknown } from "../workers/load_report.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

/** What the info routes read. */
export interface InfoApiDeps {
  /** The registry. */
  registry: WorkerRegistry;
  /** The calls to workers. */
  control: WorkerControl;
  /** Whether the gateway is shutting down. */
  draining: () => boolean;
  /** PD mode: ready needs a ready prefill and a ready decode worker. */
  pd?: boolean;
  /** Timeout for pass-through and fan-out calls, in ms. */
  timeoutMs: number;
  /** Clock of the workers' availability (breaker cool-downs). */
  clock: Clock;
}

/** `GET /readiness`: 200 with counts when a worker is ready, else 503 with the reason. */
export function readiness(d: InfoApiDeps): Response {
  const total = d.registry.size;
  const ready = d.registry.all().filter((w) => w.status === "ready");
  const healthy = ready.length;
  if (d.draining()) {
    return Response.json({ status: "not ready", reason: "draining" }, { status: 503 });
  }
  const enough = d.pd
    ? ready.some((w) => w.type === "prefill") && ready.some((w) => w.type === "decode")
    : healthy > 0;
  if (!enough) {
    return Response.json(
      {
        status: "not ready",
        reason: "insufficient healthy workers",
        healthy_workers: healthy,
        total_workers: total,
      },
      { status: 503 },
    );
  }
  return Response.json({ status: "ready", healthy_workers: healthy, total_workers: total });
}

/** `GET /v1/models`: the models the registry knows, OpenAI list shape. */
export function listModels(d: InfoApiDeps): Response {
  const models = d.registry.models();
  if (models.length === 0) return new Response("No models available", { status: 503 });
  return Response.json({
    object: "list",
    data: models.map((id) => ({ id, object: "model", created: 0, owned_by: "self_hosted" })),
  });
}

/** The worker calls `firstReady` passes through. */
export type PassThrough = "healthGenerate" | "serverInfo" | "modelInfo";

/** Passes `op` through to the first ready worker, its status and body as the worker gave them. */
export async function firstReady(
  d: InfoApiDeps,
  op: PassThrough,
  requestId: string,
): Promise<Response> {
  const now = d.clock.now();
  const w = d.registry.all().find((w) => w.available(now));
  if (!w) {
    return errorResponse(
      new GatewayError(503, "no_workers", "no ready worker to answer this", { retryAfter: 1 }),
      requestId,
    );
  }
  const res = await d.control[op](w, { timeoutMs: d.timeoutMs });
  if (res.status === 0) {
    return errorResponse(
      new GatewayError(502, "call_upstream_failed", `worker ${w.url} unreachable: ${res.error}`),
      requestId,
    );
  }
  return new Response(res.text, {
    status: res.status,
    headers: {
      "content-type": tryJson(res.text) === null ? "text/plain" : "application/json",
      "x-smg-routed-worker-id": w.id,
      "x-request-id": requestId,
    },
  });
}

/** `GET /get_loads`: a fresh load report from every worker. */
export async function getLoads(d: InfoApiDeps): Promise<Response> {
  const workers = await Promise.all(
    d.registry.all().map(async (w) => {
      const snap = w.status === "ready"
        ? await d.control.load(w, { timeoutMs: d.timeoutMs })
        : null;
      return {
        worker: w.url,
        load: usedTokensOrUnknown(snap),
        details: snap?.details ?? undefined,
      };
    }),
  );
  return Response.json({ workers });
}

/** `POST /flush_cache`: asks every worker to drop its prefix cache; 206 when some fail. */
export async function flushCache(d: InfoApiDeps): Promise<Response> {
  const results = await Promise.all(
    d.registry.all().map(async (w) => {
      const r = await d.control.flushCache(w, { timeoutMs: d.timeoutMs });
      const ok = r.status >= 200 && r.status < 300;
      return {
        worker: w.url,
        grpc: w.connection === "grpc",
        ok,
        error: ok ? undefined : r.error ?? `HTTP ${r.status}: ${r.text.slice(0, 200)}`,
      };
    }),
  );
  const failed = results.filter((r) => !r.ok);
  const all = failed.length === 0;
  return Response.json({
    status: all ? "success" : "partial_success",
    message: all
      ? "cache flushed on every worker"
      : `${failed.length} of ${results.length} workers failed`,
    workers_flushed: results.length - failed.length,
    total_http_workers: results.filter((r) => !r.grpc).length,
    total_grpc_workers: results.filter((r) => r.grpc).length,
    total_zmq_workers_skipped: 0,
    total_workers: results.length,
    successful: all ? undefined : results.filter((r) => r.ok).map((r) => r.worker),
    failed: all ? undefined : failed.map((r) => ({ worker: r.worker, error: r.error })),
  }, { status: all ? 200 : 206 });
}
