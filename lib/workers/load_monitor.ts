/**
 * The load monitor: every `--load-monitor-interval` it asks each ready worker for a load report
 * (`WorkerControl.load`: over HTTP `GET /v1/loads`, else `/get_load`, else the engine's
 * Prometheus `/metrics`; over gRPC `GetLoads`), stores it on the worker for policies, and
 * applies the overload veto. Which HTTP sources a worker lacks is remembered per URL; a worker
 * that fails to report keeps no stale veto.
 */

import type { LoadMonitorConfig } from "../config/config.ts";
import { type Clock, pause } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { LoadSnapshot } from "../core/types.ts";
import type { LoadSource, WorkerControl } from "./control.ts";
import type { WorkerRegistry } from "./registry.ts";

/** What the monitor is built from. */
export interface LoadMonitorDeps {
  /** Load monitor settings. */
  config: LoadMonitorConfig;
  /** Workers to poll. */
  registry: WorkerRegistry;
  /** The calls to workers (load reports). */
  control: WorkerControl;
  /** Clock. */
  clock: Clock;
  /** Logger (module `load`). */
  log: Logger;
  /** Per-poll timeout in ms (default 5000). */
  timeoutMs?: number;
  /** Whether anything needs loads; polling is skipped when this says no and monitoring is off. */
  wanted?: () => boolean;
}

/** Polls worker loads. */
export class LoadMonitor {
  readonly #d: LoadMonitorDeps;
  readonly #absent = new Map<string, Set<LoadSource>>();

  /** A monitor over `deps.registry`. */
  constructor(deps: LoadMonitorDeps) {
    this.#d = deps;
  }

  /** Whether polling is worth doing. */
  get active(): boolean {
    const c = this.#d.config;
    if (!c.disabled) return true;
    return c.overloadTokenUsage !== null || c.overloadWaitingRequests !== null ||
      (this.#d.wanted?.() ?? false);
  }

  /** Polls every ready worker once. */
  async pollOnce(signal?: AbortSignal): Promise<void> {
    const d = this.#d;
    const live = new Set<string>();
    await Promise.all(
      d.registry.all().map(async (w) => {
        live.add(w.url);
        if (w.status !== "ready") {
          w.overloaded = false;
          return;
        }
        let absent = this.#absent.get(w.url);
        if (!absent) this.#absent.set(w.url, absent = new Set());
        const snap = await d.control.load(w, { timeoutMs: d.timeoutMs ?? 5000, signal, absent });
        if (signal?.aborted) return;
        if (!snap) {
          w.overloaded = false;
          return;
        }
        w.load = snap;
        w.loadAt = d.clock.now();
        w.overloaded = this.#overloaded(snap);
      }),
    );
    for (const url of this.#absent.keys()) if (!live.has(url)) this.#absent.delete(url);
  }

  #overloaded(s: LoadSnapshot): boolean {
    const c = this.#d.config;
    return (c.overloadWaitingRequests !== null && s.waitingRequests >= c.overloadWaitingRequests) ||
      (c.overloadTokenUsage !== null && s.tokenUsage >= c.overloadTokenUsage);
  }

  /** Polls every interval until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const ms = this.#d.config.intervalSecs * 1000;
    while (!signal.aborted) {
      if (this.active) {
        try {
          await this.pollOnce(signal);
        } catch (e) {
          this.#d.log.error("load poll failed", { err: e });
        }
      }
      await pause(this.#d.clock, ms, signal).done;
    }
  }
}
