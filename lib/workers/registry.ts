/**
 * The worker registry: workers by id and by URL in registration order, the candidate list for a
 * model (cached until membership or model lists change), and the one stream of worker lifecycle
 * events (added, removed, models, status, breaker) every consumer subscribes to: health probes,
 * policies, metrics, readiness, the mesh, KV events.
 */

import type { WorkerStatus, WorkerType } from "../core/types.ts";
import type { BreakerState } from "./circuit_breaker.ts";
import type { Worker } from "./worker.ts";

/** A registry change. */
export type RegistryEvent =
  | { kind: "added"; worker: Worker }
  | { kind: "removed"; worker: Worker }
  | { kind: "models"; worker: Worker }
  | { kind: "status"; worker: Worker; from: WorkerStatus; to: WorkerStatus }
  | { kind: "breaker"; worker: Worker; from: BreakerState; to: BreakerState };

/** Thrown when a URL is registered twice. */
export class DuplicateWorkerError extends Error {
  /** The worker already registered under that URL. */
  readonly existing: Worker;
  /** Names the URL. */
  constructor(existing: Worker) {
    super(`worker ${existing.url} is already registered as ${existing.id}`);
    this.existing = existing;
  }
}

/** All workers this gateway knows. */
export class WorkerRegistry {
  readonly #byId = new Map<string, Worker>();
  readonly #byUrl = new Map<string, Worker>();
  readonly #listeners = new Set<(e: RegistryEvent) => void>();
  #all: Worker[] | null = null;
  readonly #forModel = new Map<string, Worker[]>();

  /** Adds a worker; throws DuplicateWorkerError when its URL is taken. */
  add(w: Worker): void {
    const existing = this.#byUrl.get(w.url);
    if (existing) throw new DuplicateWorkerError(existing);
    this.#byId.set(w.id, w);
    this.#byUrl.set(w.url, w);
    this.#invalidate();
    this.#emit({ kind: "added", worker: w });
  }

  /** Removes a worker; false when it was not there. */
  remove(id: string): boolean {
    const w = this.#byId.get(id);
    if (!w) return false;
    this.#byId.delete(id);
    this.#byUrl.delete(w.url);
    this.#invalidate();
    this.#emit({ kind: "removed", worker: w });
    return true;
  }

  /** The worker with this id. */
  get(id: string): Worker | undefined {
    return this.#byId.get(id);
  }

  /** The worker with this URL. */
  byUrl(url: string): Worker | undefined {
    return this.#byUrl.get(url);
  }

  /** Number of workers. */
  get size(): number {
    return this.#byId.size;
  }

  /** Every worker in registration order (do not mutate). */
  all(): readonly Worker[] {
    return (this.#all ??= [...this.#byId.values()]);
  }

  /**
   * Workers of `type` that may serve `model`, in registration order, whatever their status
   * (do not mutate). A null model means any worker of that type.
   */
  forModel(model: string | null, type: WorkerType = "regular"): readonly Worker[] {
    const key = `${type}\u0000${model ?? ""}`;
    let list = this.#forModel.get(key);
    if (!list) {
      list = this.all().filter((w) => w.type === type && w.serves(model));
      if (this.#forModel.size > 4096) this.#forModel.clear();
      this.#forModel.set(key, list);
    }
    return list;
  }

  /** Model ids served by at least one worker, deduplicated, in first-seen order. */
  models(): string[] {
    const seen = new Set<string>();
    for (const w of this.all()) for (const m of w.models ?? []) seen.add(m);
    return [...seen];
  }

  /** Sets a worker's model list (after discovery). */
  setModels(w: Worker, models: string[] | null): void {
    w.models = models && models.length > 0 ? models : null;
    this.#invalidate();
    this.#emit({ kind: "models", worker: w });
  }

  /** The listener a Worker calls on a status change. */
  readonly statusChanged = (worker: Worker, from: WorkerStatus, to: WorkerStatus): void => {
    this.#emit({ kind: "status", worker, from, to });
  };

  /** Reports a worker's circuit-breaker transition (its breaker calls this). */
  breakerChanged(worker: Worker, from: BreakerState, to: BreakerState): void {
    this.#emit({ kind: "breaker", worker, from, to });
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(listener: (e: RegistryEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #invalidate(): void {
    this.#all = null;
    this.#forModel.clear();
  }

  #emit(e: RegistryEvent): void {
    for (const l of this.#listeners) l(e);
  }
}
