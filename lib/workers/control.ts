/**
 * Worker control: every call the gateway makes to a worker besides inference (health probes,
 * model and KV-capacity discovery, load reports, the info API's pass-throughs and cache flush),
 * as one typed interface. `http_control.ts` implements it over `fetch` (`{url}{path}`), the gRPC
 * one (`lib/proxy/grpc/control.ts`) over sglang's scheduler RPCs, and `controlByScheme` picks
 * between them by the worker's URL. No call throws: a transport error, a timeout or an abort is a
 * result carrying the error's text.
 */

import { isGrpcUrl } from "../config/validate.ts";
import type { LoadSnapshot } from "../core/types.ts";

/** The worker a control call goes to (a `Worker` is one). */
export interface ControlTarget {
  /** The worker's URL (`http(s)://` or `grpc(s)://`), no trailing slash. */
  readonly url: string;
  /** Bearer key toward the worker, or null. */
  readonly apiKey: string | null;
}

/** How long a control call may take, and what stops it early. */
export interface ControlCall {
  /** Time for the whole call, in ms; past it the call answers with a timeout error. */
  timeoutMs: number;
  /** Stops the call (shutdown); default: nothing but the timeout. */
  signal?: AbortSignal;
}

/** The outcome of a call whose status and body the caller reads or passes through. */
export interface ControlReply {
  /** HTTP status (a gRPC answer mapped onto one), or 0 for a transport error or timeout. */
  status: number;
  /** Body text (empty on transport errors). */
  text: string;
  /** Transport error message, if any (a runtime refusal starts with `RUNTIME_REFUSED`). */
  error?: string;
}

/** A source of load reports an HTTP worker may serve (`/v1/loads`, `/get_load`, `/metrics`). */
export type LoadSource = "loads" | "get_load" | "metrics";

/** A load-report call. */
export interface LoadCall extends ControlCall {
  /**
   * The sources this worker answered do not exist, kept by the caller per worker and updated by
   * the call (cleared once all are ruled out); default: a fresh set, every source tried.
   */
  absent?: Set<LoadSource>;
}

/** The calls the gateway makes to a worker. */
export interface WorkerControl {
  /** Probes health: HTTP `GET {endpoint}` (`--health-check-endpoint`); gRPC `HealthCheck`. */
  probe(w: ControlTarget, endpoint: string, call: ControlCall): Promise<ControlReply>;
  /** The model ids the worker serves, or null when it does not say (then it serves any). */
  models(w: ControlTarget, call: ControlCall): Promise<string[] | null>;
  /** The KV cache capacity in tokens the worker states, or null. */
  kvCapacity(w: ControlTarget, call: ControlCall): Promise<number | null>;
  /** A fresh load report, or null when the worker gives none. */
  load(w: ControlTarget, call: LoadCall): Promise<LoadSnapshot | null>;
  /** `/health_generate`, passed through. */
  healthGenerate(w: ControlTarget, call: ControlCall): Promise<ControlReply>;
  /** `/get_server_info`, passed through (gRPC: `GetServerInfo` as JSON). */
  serverInfo(w: ControlTarget, call: ControlCall): Promise<ControlReply>;
  /** `/get_model_info`, passed through (gRPC: `GetModelInfo` as JSON). */
  modelInfo(w: ControlTarget, call: ControlCall): Promise<ControlReply>;
  /** Asks the worker to drop its prefix cache; 2xx when it did. */
  flushCache(w: ControlTarget, call: ControlCall): Promise<ControlReply>;
}

/** One control over two: `grpc://` and `grpcs://` workers to `grpc`, the others to `http`. */
export function controlByScheme(http: WorkerControl, grpc: WorkerControl): WorkerControl {
  const pick = (w: ControlTarget) => isGrpcUrl(w.url) ? grpc : http;
  return {
    probe: (w, endpoint, call) => pick(w).probe(w, endpoint, call),
    models: (w, call) => pick(w).models(w, call),
    kvCapacity: (w, call) => pick(w).kvCapacity(w, call),
    load: (w, call) => pick(w).load(w, call),
    healthGenerate: (w, call) => pick(w).healthGenerate(w, call),
    serverInfo: (w, call) => pick(w).serverInfo(w, call),
    modelInfo: (w, call) => pick(w).modelInfo(w, call),
    flushCache: (w, call) => pick(w).flushCache(w, call),
  };
}
