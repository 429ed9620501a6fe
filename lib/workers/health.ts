/**
 * The health checker: probes each worker's health endpoint when it is due, applies the pure
 * state machine of `health_state.ts`, and activates a new worker (model discovery, then ready)
 * on its first good probe. Pending workers are probed every `--worker-startup-check-interval`,
 * others every `--health-check-interval-secs`; a worker just registered is probed at once.
 * Workers with health checks off are activated once and never probed.
 *
 * The loop is owned by whoever calls `run(signal)`; `tick(now)` does one pass and is what tests
 * drive.
 */

import type { HealthConfig } from "../config/config.ts";
import { type Clock, pause } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { WorkerControl } from "./control.ts";
import { applyProbe } from "./health_state.ts";
import { RUNTIME_REFUSED } from "./http.ts";
import type { WorkerRegistry } from "./registry.ts";
import type { Worker } from "./worker.ts";

/** What the checker is built from. */
export interface HealthCheckerDeps {
  /** Health settings. */
  config: HealthConfig;
  /** The registry whose workers are probed. */
  registry: WorkerRegistry;
  /** The calls to workers (probe, model and KV-capacity discovery). */
  control: WorkerControl;
  /** Clock. */
  clock: Clock;
  /** Logger (module `health`). */
  log: Logger;
  /** Hears every probe result, for metrics. */
  onProbe?: (w: Worker, ok: boolean) => void;
}

/** At most this many probes run at once. */
const MAX_CONCURRENT_PROBES = 128;

/** Probes workers and moves them between states. */
export class HealthChecker {
  readonly #d: HealthCheckerDeps;
  readonly #probing = new Set<string>();
  /** Workers whose probes the runtime refused, warned about once. */
  readonly #refused = new Set<string>();
  #wake: (() => void) | null = null;

  /** A checker over `deps.registry`. */
  constructor(deps: HealthCheckerDeps) {
    this.#d = deps;
  }

  /** Asks the loop to run a pass now (after a registration). */
  poke(): void {
    this.#wake?.();
  }

  /** One pass: probes every due worker (bounded concurrency) and waits for them. */
  async tick(signal?: AbortSignal): Promise<void> {
    const now = this.#d.clock.now();
    const due = this.#d.registry.all().filter((w) =>
      w.nextProbeAt <= now && !this.#probing.has(w.id) && w.status !== "draining"
    );
    for (let i = 0; i < due.length; i += MAX_CONCURRENT_PROBES) {
      await Promise.all(due.slice(i, i + MAX_CONCURRENT_PROBES).map((w) => this.probe(w, signal)));
    }
  }

  /** Probes one worker now and applies the result. */
  async probe(w: Worker, signal?: AbortSignal): Promise<void> {
    const d = this.#d;
    const cfg = d.config;
    this.#probing.add(w.id);
    try {
      if (cfg.disabled || w.healthCheckDisabled) {
        // Never probed: activate once (discovery only), then stay as is.
        w.nextProbeAt = Infinity;
        if (w.status === "pending") await this.#activate(w, signal);
        return;
      }
      const res = await d.control.probe(w, cfg.endpoint, {
        timeoutMs: cfg.timeoutSecs * 1000,
        signal,
      });
      if (signal?.aborted) return;
      const ok = res.status >= 200 && res.status < 300;
      d.onProbe?.(w, ok);
      const now = d.clock.now();
      const expired = now - w.registeredAt >= cfg.startupTimeoutSecs * 1000;
      const step = applyProbe(w.status, w.health, ok, {
        success: cfg.successThreshold,
        failure: cfg.failureThreshold,
      }, expired);
      w.health = step.counters;
      if (!ok && res.error?.startsWith(RUNTIME_REFUSED) && !this.#refused.has(w.id)) {
        // Not the worker's fault and not going away: said once, at warn.
        this.#refused.add(w.id);
        d.log.warn("health probe refused by the runtime", { worker: w.url, err: res.error });
      }
      if (!ok && d.log.enabled("debug")) {
        d.log.debug("health probe failed", { worker: w.url, status: res.status, err: res.error });
      }
      if (step.status === "ready" && w.status === "pending") {
        await this.#activate(w, signal);
      } else if (step.status !== w.status) {
        d.log.info("worker status changed", { worker: w.url, from: w.status, to: step.status });
        w.setStatus(step.status);
      }
      const interval = w.status === "pending" ? cfg.startupCheckIntervalSecs : cfg.intervalSecs;
      w.nextProbeAt = d.clock.now() + interval * 1000;
    } finally {
      this.#probing.delete(w.id);
    }
  }

  async #activate(w: Worker, signal?: AbortSignal): Promise<void> {
    const d = this.#d;
    const call = { timeoutMs: d.config.timeoutSecs * 1000, signal };
    if (w.models === null) {
      const models = await d.control.models(w, call);
      if (signal?.aborted || w.status !== "pending") return;
      if (models) d.registry.setModels(w, models);
    }
    if (w.kvCapacity === null) {
      w.kvCapacity = await d.control.kvCapacity(w, call);
      if (signal?.aborted || w.status !== "pending") return;
    }
    d.log.info("worker ready", { worker: w.url, id: w.id, models: w.models ?? "any" });
    w.setStatus("ready");
  }

  /** Probes due workers until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.tick(signal);
      } catch (e) {
        this.#d.log.error("health pass failed", { err: e });
      }
      const now = this.#d.clock.now();
      let next = now + 1000;
      for (const w of this.#d.registry.all()) next = Math.min(next, w.nextProbeAt);
      const p = pause(this.#d.clock, Math.max(10, next - now), signal);
      this.#wake = p.wake;
      await p.done;
      this.#wake = null;
    }
  }
}
