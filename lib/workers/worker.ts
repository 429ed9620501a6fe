/**
 * One worker: its identity (id, URL, models, role), its mutable state (status, in-flight count,
 * breaker, health counters, last load report), and its public JSON form for `GET /workers`.
 * The API key is kept private: it is sent to the worker, never shown.
 */

import type {
  ConnectionMode,
  LoadSnapshot,
  WorkerStatus,
  WorkerType,
  WorkerView,
} from "../core/types.ts";
import { decayed } from "../core/recent_work.ts";
import { RatioEstimate } from "../core/chars_per_token.ts";
import { BREAKER_GAUGE, CircuitBreaker } from "./circuit_breaker.ts";
import { WorkerProgress } from "./progress.ts";
import type { HealthCounters } from "./health_state.ts";

/** What a caller says about a worker when registering it (`POST /workers` body, snake_case). */
export interface WorkerSpec {
  /** Base URL (http or https). */
  url: string;
  /** Models it serves; discovered from the worker when absent. */
  models?: string[];
  /** Role; default regular. */
  workerType?: WorkerType;
  /** Free-form labels (e.g. a per-model policy name). */
  labels?: Record<string, string>;
  /** Bearer key sent to the worker. */
  apiKey?: string | null;
  /** Priority label, default 50. */
  priority?: number;
  /** Cost label, default 1.0. */
  cost?: number;
  /** Bootstrap port for prefill workers. */
  bootstrapPort?: number | null;
  /** No health probes for this worker: it starts ready. */
  disableHealthCheck?: boolean;
}

/** Where a worker's registration comes from: this router, or a mesh peer that owns it. */
export type WorkerOrigin = "local" | "mesh";

let nextSeq = 1;

/** Listener for a status change. */
export type StatusListener = (w: Worker, from: WorkerStatus, to: WorkerStatus) => void;

/** A registered worker. */
export class Worker implements WorkerView {
  /** Registry id (UUID). */
  readonly id: string;
  /** Registered here (`local`), or imported from a mesh peer (`mesh`). */
  origin: WorkerOrigin = "local";
  /** For an import: the owner's key in the mesh store (its worker id there); else null. */
  meshKey: string | null = null;
  /** Registration sequence number, unique in this process. */
  readonly seq = nextSeq++;
  /** Base URL without a trailing slash. */
  readonly url: string;
  /** Role. */
  readonly type: WorkerType;
  /** How the gateway talks to it, from its URL's scheme (grpc:// and grpcs:// are gRPC). */
  readonly connection: ConnectionMode;
  /** Labels, discovered and user-given. */
  readonly labels: Record<string, string>;
  /** Priority label. */
  readonly priority: number;
  /** Cost label. */
  readonly cost: number;
  /** Bootstrap port (prefill only). */
  readonly bootstrapPort: number | null;
  /** Whether periodic probes are off for this worker. */
  readonly healthCheckDisabled: boolean;
  /** When the worker was registered (clock ms). */
  readonly registeredAt: number;
  /** Served model ids; null means not known yet, so any model may go to it. */
  models: string[] | null;
  /** Prompt tokens this gateway sent that have not produced a first token yet. */
  ownPrefillTokens = 0;
  /**
   * In flight on it from the mesh's other routers, and their prefill backlog on it, as they last
   * told (`lib/mesh/adapters/load_sync.ts`); 0 without a mesh.
   */
  peerInFlight = 0;
  peerPrefillTokens = 0;
  /**
   * The peers' recent work on it (`recentWork`) as they last told, decayed to
   * `peerRecentWorkAt` (clock ms); 0 without load sync.
   */
  peerRecentWork = 0;
  peerRecentWorkAt = 0;
  /** Requests this gateway sent to the worker, ever. */
  requestsTotal = 0;
  /** Prompt tokens of the answers whose usage the gateway read (a cache prediction to check). */
  reportedPromptTokens = 0;
  /** Cached tokens those answers reported (`prompt_tokens_details.cached_tokens`). */
  reportedCachedTokens = 0;
  /** KV cache capacity in tokens (`/get_server_info`'s `max_total_num_tokens`), or null. */
  kvCapacity: number | null = null;
  /** Its own characters per token, from its answers' `prompt_tokens` (`TextRatios.observe`). */
  readonly textRatio = new RatioEstimate();
  /** Last backend load report. */
  load: LoadSnapshot | null = null;
  /** When `load` was received (clock ms). */
  loadAt = 0;
  /** Vetoed by the overload guard until the next load report clears it. */
  overloaded = false;
  readonly #keys = new Map<string, number>();
  /** Probe counters. */
  health: HealthCounters = { ok: 0, fail: 0 };
  /** When the next probe is due (clock ms). */
  nextProbeAt = 0;
  /** The worker's circuit breaker. */
  readonly breaker: CircuitBreaker;
  /** What its attempts received lately; a missed progress deadline excludes it a while. */
  readonly progress = new WorkerProgress();
  #status: WorkerStatus;
  #inFlight = 0;
  /** This gateway's recent work, decayed to `#workAt`. */
  #work = 0;
  #workAt = 0;
  #idle: PromiseWithResolvers<void> | null = null;
  readonly #apiKey: string | null;
  readonly #onStatus?: StatusListener;

  /** Builds a worker record; `status` is its first state. */
  constructor(
    id: string,
    spec: WorkerSpec,
    breaker: CircuitBreaker,
    status: WorkerStatus,
    now: number,
    onStatus?: StatusListener,
  ) {
    this.id = id;
    this.url = spec.url;
    this.type = spec.workerType ?? "regular";
    this.connection = spec.url.startsWith("grpc") ? "grpc" : "http";
    this.labels = { ...spec.labels };
    this.priority = spec.priority ?? 50;
    this.cost = spec.cost ?? 1.0;
    this.bootstrapPort = spec.bootstrapPort ?? null;
    this.healthCheckDisabled = spec.disableHealthCheck ?? false;
    this.models = spec.models && spec.models.length > 0 ? [...spec.models] : null;
    this.breaker = breaker;
    this.registeredAt = now;
    this.#status = status;
    this.#apiKey = spec.apiKey ?? null;
    this.#onStatus = onStatus;
  }

  /** Requests in flight from this gateway. */
  get ownInFlight(): number {
    return this.#inFlight;
  }

  /** Sets this gateway's in-flight count; reaching 0 resolves `idle()`. */
  set ownInFlight(n: number) {
    this.#inFlight = n;
    if (n === 0 && this.#idle) {
      this.#idle.resolve();
      this.#idle = null;
    }
  }

  /** In flight from this gateway and, on a mesh, from its peers (`WorkerView.inFlight`). */
  get inFlight(): number {
    return this.#inFlight + this.peerInFlight;
  }

  /** The prefill backlog from this gateway and its peers (`WorkerView.prefillTokens`). */
  get prefillTokens(): number {
    return this.ownPrefillTokens + this.peerPrefillTokens;
  }

  /** Resolves once no request from this gateway is in flight on the worker (at once if none is). */
  idle(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return (this.#idle ??= Promise.withResolvers<void>()).promise;
  }

  /** Characters per token of its answers so far; null before enough of them. */
  get charsPerToken(): number | null {
    return this.textRatio.value;
  }

  /** Requests in flight carrying sticky key `key`. */
  keyInFlight(key: string): number {
    return this.#keys.get(key) ?? 0;
  }

  /** Distinct sticky keys with a request in flight. */
  get activeKeys(): number {
    return this.#keys.size;
  }

  /** Counts a request with sticky key `key` in flight; returns its release (call once). */
  holdKey(key: string): () => void {
    this.#keys.set(key, (this.#keys.get(key) ?? 0) + 1);
    return () => {
      const n = (this.#keys.get(key) ?? 1) - 1;
      if (n <= 0) this.#keys.delete(key);
      else this.#keys.set(key, n);
    };
  }

  /**
   * Uncached prompt tokens this gateway sent it, decayed to clock time `now`
   * (`lib/core/recent_work.ts`): τ × the rate at which new tokens enter its KV cache and push
   * old ones out.
   */
  ownRecentWork(now: number): number {
    return decayed(this.#work, now - this.#workAt);
  }

  /** `ownRecentWork` plus the peers' (load sync), both at `now`. */
  recentWork(now: number): number {
    return this.ownRecentWork(now) + decayed(this.peerRecentWork, now - this.peerRecentWorkAt);
  }

  /**
   * Counts `tokens` in the prefill backlog, and at clock time `now` (when given) in the recent
   * work; returns their discharge from the backlog (idempotent).
   */
  chargePrefill(tokens: number, now?: number): () => void {
    const n = Number.isFinite(tokens) && tokens > 0 ? tokens : 0;
    this.ownPrefillTokens += n;
    if (now !== undefined && n > 0) {
      this.#work = this.ownRecentWork(now) + n;
      this.#workAt = now;
    }
    let charged = true;
    return () => {
      if (!charged) return;
      charged = false;
      this.ownPrefillTokens = Math.max(0, this.ownPrefillTokens - n);
    };
  }

  /** Lifecycle status. */
  get status(): WorkerStatus {
    return this.#status;
  }

  /** Moves to `to`, telling the listener when it is a change. */
  setStatus(to: WorkerStatus): void {
    const from = this.#status;
    if (from === to) return;
    this.#status = to;
    this.#onStatus?.(this, from, to);
  }

  /** The key sent to the worker as a bearer token, if any. */
  get apiKey(): string | null {
    return this.#apiKey;
  }

  /** Whether the worker serves `model` (null model or unknown models: yes). */
  serves(model: string | null): boolean {
    return model === null || this.models === null || this.models.includes(model);
  }

  /**
   * Routable right now: ready, breaker not open, not vetoed, not stalled (a stalled worker is
   * still `usable`: picked when nothing else is).
   */
  available(now: number): boolean {
    return this.usable(now) && !this.progress.stalled(now);
  }

  /** Ready, breaker not open, not vetoed: routable, or stalled (`WorkerProgress`). */
  usable(now: number): boolean {
    return this.#status === "ready" && !this.overloaded && this.breaker.allows(now);
  }

  /** The `GET /workers` item (SMG's WorkerInfo fields; never the API key). */
  info(now: number): Record<string, unknown> {
    const out: Record<string, unknown> = {
      id: this.id,
      url: this.url,
      model_id: this.models?.[0],
      models: this.models?.map((id) => ({ id })),
      worker_type: this.type,
      connection_mode: this.connection,
      labels: this.labels,
      priority: this.priority,
      cost: this.cost,
      bootstrap_port: this.bootstrapPort ?? undefined,
      is_healthy: this.#status === "ready",
      status: this.#status,
      load: this.ownInFlight,
      circuit_breaker: {
        state: this.breaker.state(now),
        state_code: BREAKER_GAUGE[this.breaker.state(now)],
        consecutive_failures: this.breaker.consecutiveFailures,
      },
      overloaded: this.overloaded,
      stalled: this.progress.stalled(now),
      requests_total: this.requestsTotal,
    };
    if (this.load) {
      const { details: _d, ...summary } = this.load;
      out.load_report = summary;
    }
    return out;
  }
}
