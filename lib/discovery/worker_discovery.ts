/**
 * Worker discovery: keeps the registry in line with the pods a watch reports. A pod matching
 * the selector (or, in PD mode, the prefill or decode selector) that is Running and Ready is a
 * worker at `http://PODIP:PORT`, registered as this router's own (so the mesh publishes it);
 * one that stops being ready is removed from routing (drained and deregistered) until it is
 * ready again; one deleted or terminating is drained and removed. A full list replaces what
 * was known: pods missing from it are gone. Each pod is known by its uid; the worker it
 * registered is the only one it removes (a URL also given by `--worker-urls` stays). A URL
 * still draining when its pod comes back is registered at the next resync (every 10 s). A pod
 * whose address the egress allow-list refuses is not registered, with one warning per address.
 */

import type { DiscoveryConfig } from "../config/config.ts";
import { EgressRefusedError } from "../core/egress.ts";
import type { Logger } from "../core/log.ts";
import { DuplicateWorkerError } from "../workers/registry.ts";
import type { WorkerManager } from "../workers/manager.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import { isTerminating, type Pod, type PodWorker, podWorker } from "./pods.ts";

/** What discovery counts (SMG's `smg_discovery_*` metrics). */
export interface DiscoveryCounters {
  /** A registration's outcome; `refused` (ours) is the egress allow-list's no. */
  registered(result: "ok" | "failed" | "duplicate" | "refused"): void;
  deregistered(reason: "deleted" | "not_ready" | "gone"): void;
  synced(seconds: number): void;
  discovered(n: number): void;
}

/** What discovery works with. */
export interface WorkerDiscoveryDeps {
  config: DiscoveryConfig;
  /** PD mode: pods are prefill or decode workers. */
  pd: boolean;
  registry: WorkerRegistry;
  manager: WorkerManager;
  log: Logger;
  counters?: DiscoveryCounters;
}

interface Known {
  worker: PodWorker;
  /** The worker this pod registered, or null (not serving, or not registered yet). */
  id: string | null;
  /** The URL the egress allow-list last refused for this pod (warned once). */
  refused?: string;
}

/** Pods in, workers out. */
export class WorkerDiscovery {
  readonly #d: WorkerDiscoveryDeps;
  readonly #known = new Map<string, Known>();

  /** Discovery over `d.registry`. */
  constructor(d: WorkerDiscoveryDeps) {
    this.#d = d;
  }

  /** Pods known (matching the selectors), serving or not. */
  get size(): number {
    return this.#known.size;
  }

  /** A full list: every matching pod now. */
  onList(pods: readonly Pod[]): void {
    const t = performance.now();
    const seen = new Set<string>();
    for (const pod of pods) {
      const w = podWorker(pod, this.#d.config, this.#d.pd);
      if (!w) continue;
      seen.add(w.uid);
      this.#upsert(w, isTerminating(pod));
    }
    for (const [uid, k] of this.#known) {
      if (!seen.has(uid)) this.#forget(uid, k, "gone");
    }
    this.#report(t);
  }

  /** One watch event. */
  onEvent(type: "ADDED" | "MODIFIED" | "DELETED", pod: Pod): void {
    const t = performance.now();
    const w = podWorker(pod, this.#d.config, this.#d.pd);
    const uid = pod.metadata?.uid;
    if (type === "DELETED" || !w) {
      // Deleted, or relabelled out of the selector.
      const k = uid ? this.#known.get(uid) : undefined;
      if (uid && k) this.#forget(uid, k, type === "DELETED" ? "deleted" : "gone");
    } else this.#upsert(w, isTerminating(pod));
    this.#report(t);
  }

  /**
   * Retries registrations that could not be made yet (a URL still draining), and registers
   * again a serving pod's worker that something else removed (`--remove-unhealthy-workers`,
   * `DELETE /workers/{id}`).
   */
  resync(): void {
    for (const [uid, k] of this.#known) {
      this.#lost(k);
      if (k.worker.serving && k.id === null) this.#register(uid, k);
    }
  }

  /** Forgets a registration the registry no longer holds (removed by another path). */
  #lost(k: Known): void {
    if (k.id === null) return;
    const w = this.#d.registry.get(k.id);
    if (!w || (w.status === "draining" && k.worker.serving)) k.id = null;
  }

  #upsert(w: PodWorker, terminating: boolean): void {
    const k = this.#known.get(w.uid);
    if (terminating) {
      if (k) this.#forget(w.uid, k, "deleted");
      return;
    }
    if (!k) {
      const fresh: Known = { worker: w, id: null };
      this.#known.set(w.uid, fresh);
      if (w.serving) this.#register(w.uid, fresh);
      return;
    }
    this.#lost(k);
    const moved = k.worker.url !== w.url || k.worker.model !== w.model ||
      k.worker.type !== w.type || k.worker.bootstrapPort !== w.bootstrapPort;
    k.worker = w;
    if (k.id !== null && (!w.serving || moved)) this.#deregister(k, "not_ready");
    if (w.serving && k.id === null) this.#register(w.uid, k);
  }

  #register(uid: string, k: Known): void {
    const d = this.#d;
    const w = k.worker;
    try {
      const worker = d.manager.add({
        url: w.url,
        workerType: w.type,
        bootstrapPort: w.bootstrapPort,
        ...(w.model !== null ? { models: [w.model] } : {}),
      });
      k.id = worker.id;
      d.counters?.registered("ok");
      d.log.info("registered a discovered worker", { pod: w.pod, worker: w.url, type: w.type });
    } catch (e) {
      if (e instanceof DuplicateWorkerError) {
        d.counters?.registered("duplicate");
        // Registered otherwise (flags, API), or still draining from an earlier life: not ours.
        d.log.debug("discovered worker already registered", { pod: w.pod, worker: w.url });
        return;
      }
      if (e instanceof EgressRefusedError) {
        d.counters?.registered("refused");
        // Once per pod address: its status updates would repeat the same refusal.
        if (k.refused === w.url) return;
        k.refused = w.url;
        d.log.warn("discovered worker refused by the egress allow-list", {
          pod: w.pod,
          worker: w.url,
          reason: e.message,
        });
        return;
      }
      d.counters?.registered("failed");
      d.log.warn("cannot register a discovered worker", { pod: w.pod, uid, err: String(e) });
    }
  }

  #deregister(k: Known, reason: "deleted" | "not_ready" | "gone"): void {
    if (k.id === null) return;
    if (this.#d.manager.remove(k.id)) {
      this.#d.counters?.deregistered(reason);
      this.#d.log.info("deregistering a discovered worker", {
        pod: k.worker.pod,
        worker: k.worker.url,
        reason,
      });
    }
    k.id = null;
  }

  #forget(uid: string, k: Known, reason: "deleted" | "gone"): void {
    this.#deregister(k, reason);
    this.#known.delete(uid);
  }

  #report(startedAt: number): void {
    const c = this.#d.counters;
    if (!c) return;
    c.synced((performance.now() - startedAt) / 1000);
    let serving = 0;
    for (const k of this.#known.values()) if (k.id !== null) serving++;
    c.discovered(serving);
  }
}
