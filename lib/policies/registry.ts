/**
 * Which policy routes which model. The default policy (`--policy`) serves every model, except a
 * model whose first registered worker carries a `policy` label naming another policy: that model
 * gets its own instance, built with the operator's tuning (SMG builds it with library
 * defaults, which differ from the CLI's), kept while the model has workers. Models without a
 * label share the default instance (one cache-aware policy keeps per-model trees inside it).
 *
 * Worker removals reach every policy instance (and PD's two legs), so trees, rings and pins
 * forget the worker. It follows the worker registry's events (`follow`), read structurally: the
 * policies layer imports nothing of the workers'.
 */

import type { PolicyName } from "../config/config.ts";
import { POLICY_NAMES } from "../config/config.ts";
import type { Logger } from "../core/log.ts";
import type { Policy } from "./policy.ts";

/** Builds a fresh instance of a policy by name; throws when it cannot. */
export type PolicyBuilder = (name: PolicyName) => Policy;

/** A worker registry event, as far as policies read it. */
export interface WorkerEvent {
  /** `added`, `models` and `removed` are read; others are ignored. */
  kind: string;
  /** The worker. */
  worker: {
    id: string;
    models: readonly string[] | null;
    labels: Readonly<Record<string, string | undefined>>;
  };
}

/** Subscribes a listener to worker events; returns the unsubscribe function. */
export type WorkerEvents = (listener: (e: WorkerEvent) => void) => () => void;

interface ModelEntry {
  policy: Policy;
  workers: Set<string>;
}

/** The model → policy map. */
export class PolicyRegistry {
  readonly #default: Policy;
  readonly #build: PolicyBuilder;
  readonly #log: Logger;
  readonly #models = new Map<string, ModelEntry>();
  readonly #workerModels = new Map<string, string[]>();

  /** `defaultPolicy` serves every model without its own. */
  constructor(defaultPolicy: Policy, build: PolicyBuilder, log: Logger) {
    this.#default = defaultPolicy;
    this.#build = build;
    this.#log = log;
  }

  /** The default policy. */
  get default(): Policy {
    return this.#default;
  }

  /** The policy that routes `model` (null: any model, the default). */
  forModel(model: string | null): Policy {
    return (model === null ? undefined : this.#models.get(model)?.policy) ?? this.#default;
  }

  /** Every distinct policy instance. */
  all(): Policy[] {
    return [...new Set([this.#default, ...[...this.#models.values()].map((e) => e.policy)])];
  }

  /**
   * A worker joined or learned its models. The first worker of a model decides its policy
   * through `label` (its `policy` label); later workers' labels are ignored, as in SMG.
   */
  workerModels(
    workerId: string,
    models: readonly string[] | null,
    label: string | undefined,
  ): void {
    const before = this.#workerModels.get(workerId) ?? [];
    const now = models ?? [];
    for (const m of before) if (!now.includes(m)) this.#leave(m, workerId);
    for (const m of now) {
      const entry = this.#models.get(m) ?? this.#create(m, label);
      entry.workers.add(workerId);
    }
    this.#workerModels.set(workerId, [...now]);
  }

  /**
   * Follows the worker registry: a worker's models decide their policies; a removal reaches
   * every policy, and `also` (policies outside the model map: PD's prefill and decode legs).
   */
  follow(events: WorkerEvents, also: readonly Policy[] = []): () => void {
    return events((e) => {
      const w = e.worker;
      if (e.kind === "added" || e.kind === "models") {
        this.workerModels(w.id, w.models, w.labels.policy);
      } else if (e.kind === "removed") {
        this.workerRemoved(w.id);
        for (const p of also) p.onWorkerRemoved?.(w.id);
      }
    });
  }

  /** A worker left: it leaves every model, and every policy forgets it. */
  workerRemoved(workerId: string): void {
    for (const p of this.all()) p.onWorkerRemoved?.(workerId);
    for (const m of this.#workerModels.get(workerId) ?? []) this.#leave(m, workerId);
    this.#workerModels.delete(workerId);
  }

  #create(model: string, label: string | undefined): ModelEntry {
    const name = normalise(label);
    let policy = this.#default;
    if (label !== undefined && name === null) {
      this.#log.warn("worker policy label names no policy; the model uses the default", {
        model,
        label,
      });
    } else if (name !== null && name !== this.#default.name) {
      try {
        policy = this.#build(name);
        this.#log.info("model routed by its own policy", { model, policy: name });
      } catch (e) {
        this.#log.warn("worker policy label cannot be used; the model uses the default", {
          model,
          label,
          err: e,
        });
      }
    }
    const entry = { policy, workers: new Set<string>() };
    this.#models.set(model, entry);
    return entry;
  }

  #leave(model: string, workerId: string): void {
    const entry = this.#models.get(model);
    if (!entry) return;
    entry.workers.delete(workerId);
    if (entry.workers.size > 0) return;
    this.#models.delete(model);
    if (entry.policy !== this.#default) this.onRetired?.(entry.policy);
  }

  /** Hears a model's own policy instance being dropped (its last worker left). */
  onRetired: ((policy: Policy) => void) | null = null;
}

/** A policy name from a label (case-insensitive; `roundrobin` for `round_robin` too), or null. */
export function normalise(label: string | undefined): PolicyName | null {
  if (label === undefined) return null;
  const squash = (s: string) => s.toLowerCase().replaceAll("_", "").replaceAll("-", "");
  return POLICY_NAMES.find((n) => squash(n) === squash(label)) ?? null;
}
