/**
 * Worker lifecycle operations behind `POST /workers`, `DELETE /workers/{id}` and the start-up
 * URLs: validate a spec, create the worker (pending, probed at once by the health checker),
 * and remove it after draining (no new requests; in-flight ones finish or the settle time runs
 * out). Removals are background tasks owned here and awaited by `stop()`. Every registration
 * passes the egress policy first.
 */

import type { CircuitBreakerConfig, HealthConfig } from "../config/config.ts";
import { normalizeWorkerUrl } from "../config/validate.ts";
import { type Clock, pause } from "../core/clock.ts";
import type { EgressPolicy } from "../core/egress.ts";
import { ConfigError, invalidRequest } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";
import type { WorkerType } from "../core/types.ts";
import { CircuitBreaker } from "./circuit_breaker.ts";
import type { WorkerRegistry } from "./registry.ts";
import { Worker, type WorkerSpec } from "./worker.ts";

/** What the manager is built from. */
export interface WorkerManagerDeps {
  /** The registry to change. */
  registry: WorkerRegistry;
  /** Health settings (drain time, disabled probes). */
  health: HealthConfig;
  /** Breaker settings for new workers. */
  circuitBreaker: CircuitBreakerConfig;
  /** Clock. */
  clock: Clock;
  /** Logger (module `workers`). */
  log: Logger;
  /**
   * Which hosts a worker may be registered at (`--worker-host-allowlist`, link-local and own
   * ports); default: every host.
   */
  egress?: EgressPolicy;
  /** Worker ids; default crypto.randomUUID. */
  newId?: () => string;
}

const WORKER_TYPES: readonly WorkerType[] = ["regular", "prefill", "decode"];

/**
 * The worker URL for `connection_mode` (SMG's field: the URL's scheme decides when it has one;
 * `host:port` or an `http(s)://` URL with `"grpc"` is the gRPC worker there).
 */
function withConnectionMode(given: string, mode: unknown): string {
  if (mode === undefined || mode === null) return given;
  if (mode !== "http" && mode !== "grpc") {
    throw invalidRequest("'connection_mode' must be http or grpc", "connection_mode");
  }
  const raw = given.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw)?.[1].toLowerCase();
  if (scheme === undefined) {
    if (raw.includes("@")) throw invalidRequest("a worker URL carries no credentials", "url");
    return `${mode}://${raw}`;
  }
  const grpc = scheme === "grpc" || scheme === "grpcs";
  if (mode === "grpc" && (scheme === "http" || scheme === "https")) {
    return raw.replace(/^https?/i, scheme === "https" ? "grpcs" : "grpc");
  }
  if (mode === "http" && grpc) {
    throw invalidRequest(`'connection_mode' http contradicts the URL ${raw}`, "connection_mode");
  }
  return raw;
}

/** Parses a `POST /workers` body (SMG's snake_case WorkerSpec); 400 on a bad field. */
export function parseWorkerSpec(body: unknown): WorkerSpec {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw invalidRequest("worker spec must be a JSON object");
  }
  const b = body as Record<string, unknown>;
  if (typeof b.url !== "string") {
    throw invalidRequest("'url' is required and must be a string", "url");
  }
  let url = withConnectionMode(b.url, b.connection_mode);
  try {
    url = normalizeWorkerUrl(url, "url");
  } catch (e) {
    throw invalidRequest((e as ConfigError).message, "url");
  }
  const spec: WorkerSpec = { url };
  const models = b.models ?? (b.model_id !== undefined ? [{ id: b.model_id }] : undefined);
  if (models !== undefined) {
    if (!Array.isArray(models)) throw invalidRequest("'models' must be an array", "models");
    spec.models = models.map((m, i) => {
      const id = typeof m === "string" ? m : (m as { id?: unknown })?.id;
      if (typeof id !== "string" || !id) {
        throw invalidRequest(`'models[${i}].id' must be a string`, "models");
      }
      return id;
    });
  }
  if (b.worker_type !== undefined) {
    if (!WORKER_TYPES.includes(b.worker_type as WorkerType)) {
      throw invalidRequest(
        `'worker_type' must be one of ${WORKER_TYPES.join(", ")}`,
        "worker_type",
      );
    }
    spec.workerType = b.worker_type as WorkerType;
  }
  if (b.labels !== undefined) {
    const ok = typeof b.labels === "object" && b.labels !== null && !Array.isArray(b.labels) &&
      Object.values(b.labels).every((v) => typeof v === "string");
    if (!ok) throw invalidRequest("'labels' must be an object of strings", "labels");
    spec.labels = b.labels as Record<string, string>;
  }
  for (const f of ["priority", "cost", "bootstrap_port"] as const) {
    if (b[f] !== undefined && b[f] !== null && typeof b[f] !== "number") {
      throw invalidRequest(`'${f}' must be a number`, f);
    }
  }
  if (b.api_key !== undefined && b.api_key !== null && typeof b.api_key !== "string") {
    throw invalidRequest("'api_key' must be a string", "api_key");
  }
  spec.priority = b.priority as number | undefined;
  spec.cost = b.cost as number | undefined;
  spec.bootstrapPort = b.bootstrap_port as number | undefined;
  spec.apiKey = b.api_key as string | undefined;
  const health = b.health as { disable_health_check?: unknown } | undefined;
  if (health?.disable_health_check === true) spec.disableHealthCheck = true;
  return spec;
}

/** Adds and removes workers. */
export class WorkerManager {
  readonly #d: WorkerManagerDeps;
  readonly #removals = new Set<Promise<void>>();
  readonly #stop = new AbortController();

  /** A manager over `deps.registry`. */
  constructor(deps: WorkerManagerDeps) {
    this.#d = deps;
  }

  /**
   * Creates and registers a worker (pending until its first good probe). Throws
   * `EgressRefusedError` for a host the egress policy refuses (every registration path comes
   * here: flags, the API, discovery, mesh imports) and `DuplicateWorkerError` on a duplicate URL.
   * `from` marks a mesh import: its owner's key and the status the owner's health sets.
   */
  add(spec: WorkerSpec, from?: { meshKey: string; status: "ready" | "not_ready" }): Worker {
    const d = this.#d;
    d.egress?.check(spec.url, spec.labels);
    const imported = d.registry.byUrl(spec.url);
    if (!from && imported?.origin === "mesh") {
      // Registering a URL here claims it: this router's own worker replaces a peer's copy.
      d.registry.remove(imported.id);
      d.log.info("worker claimed from a mesh peer", { worker: imported.url });
    }
    const cb = d.circuitBreaker;
    const id = d.newId?.() ?? crypto.randomUUID();
    let worker: Worker | null = null;
    const breaker = new CircuitBreaker({
      failureThreshold: cb.failureThreshold,
      successThreshold: cb.successThreshold,
      openMs: cb.timeoutSecs * 1000,
      windowMs: cb.windowSecs * 1000,
      disabled: cb.disabled,
    }, (from, to) => {
      if (worker) d.registry.breakerChanged(worker, from, to);
    });
    const status = from?.status ?? "pending";
    worker = new Worker(id, spec, breaker, status, d.clock.now(), d.registry.statusChanged);
    if (from) {
      worker.origin = "mesh";
      worker.meshKey = from.meshKey;
    }
    d.registry.add(worker);
    d.log.info("worker registered", { worker: worker.url, id });
    return worker;
  }

  /**
   * Starts removing a worker: it stops taking requests at once, then leaves the registry when
   * its in-flight requests are done or `--drain-settle-secs` passed. False if unknown.
   */
  remove(id: string): boolean {
    const w = this.#d.registry.get(id);
    if (!w) return false;
    if (w.status === "draining") return true;
    const wasReady = w.status === "ready";
    w.setStatus("draining");
    const task = this.#drainThenRemove(w, wasReady).finally(() => this.#removals.delete(task));
    this.#removals.add(task);
    return true;
  }

  async #drainThenRemove(w: Worker, wasReady: boolean): Promise<void> {
    const d = this.#d;
    const settleMs = d.health.drainSettleSecs * 1000;
    if (wasReady && w.ownInFlight > 0 && settleMs > 0) {
      // Until its last request is done, the settle time is over, or shutdown, whichever first.
      const settle = pause(d.clock, settleMs, this.#stop.signal);
      void w.idle().then(settle.wake);
      await settle.done;
    }
    if (d.registry.remove(w.id)) {
      d.log.info("worker removed", { worker: w.url, id: w.id });
    }
  }

  /** Finishes pending removals at once (shutdown). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#removals);
  }
}
