/**
 * Worker registry sync: each router publishes the workers
 * it registered itself under `workers/<its worker id>` in the replicated store, on add, status
 * change and removal, without the API key; peers import them into their own registries and
 * health-check them there. Rules, each one a code path below:
 * - an import is rebuilt from the published spec; the owner's health sets its first state
 *   (ready or not_ready) and afterwards only nudges: healthy promotes pending or not_ready to
 *   ready, unhealthy demotes ready to not_ready; failed and draining are left to local probes;
 * - workers are matched by URL, and a router keeps its own registration over a peer's copy;
 * - only the owner removes: its tombstone removes the imports everywhere; a peer's tombstone of
 *   an owner's key is answered by publishing again; deleting an import locally lasts until the
 *   next reconcile (every 30 s) imports it again;
 * - a departed router's workers stay (nobody else removes them);
 * - a loopback URL is published with a warning (a peer importing it would route to itself);
 * - an import whose host this router's egress allow-list refuses is not imported (one warning).
 * Store changes are hints: each handler re-reads the store's current value for the key.
 */

import { normalizeWorkerUrl } from "../../config/validate.ts";
import { EgressRefusedError } from "../../core/egress.ts";
import type { Logger } from "../../core/log.ts";
import type { WorkerManager } from "../../workers/manager.ts";
import type { WorkerRegistry } from "../../workers/registry.ts";
import type { Worker, WorkerSpec } from "../../workers/worker.ts";
import type { Clock } from "../../core/clock.ts";
import type { LwwStore } from "../store/lww_store.ts";
import { compareVersions } from "../store/version.ts";

/** The store namespace of published workers. */
export const WORKERS_NS = "workers";

/** A worker as published (JSON in the store). */
export interface PublishedWorker {
  /** Base URL. */
  url: string;
  /** Models, null when discovered (any). */
  models: string[] | null;
  /** Role. */
  worker_type: "regular" | "prefill" | "decode";
  /** Labels. */
  labels: Record<string, string>;
  /** Priority label. */
  priority: number;
  /** Cost label. */
  cost: number;
  /** Prefill bootstrap port. */
  bootstrap_port: number | null;
  /** Whether the owner probes it at all. */
  disable_health_check: boolean;
  /** The owner's view: ready. */
  healthy: boolean;
  /** The owner's router name. */
  owner: string;
}

/** What the adapter works with. */
export interface WorkerSyncDeps {
  /** This router's registry. */
  registry: WorkerRegistry;
  /** Adds and removes workers. */
  manager: WorkerManager;
  /** The replicated store. */
  store: LwwStore;
  /** This router's mesh name (published as owner). */
  router: string;
  /** Time, for the reconcile timer. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** Reconcile period (30 s). */
  reconcileMs?: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

function publishedOf(w: Worker, router: string): PublishedWorker {
  return {
    url: w.url,
    models: w.models,
    worker_type: w.type,
    labels: { ...w.labels },
    priority: w.priority,
    cost: w.cost,
    bootstrap_port: w.bootstrapPort,
    disable_health_check: w.healthCheckDisabled,
    healthy: w.status === "ready",
    owner: router,
  };
}

function specOf(p: PublishedWorker): WorkerSpec {
  return {
    url: p.url,
    models: p.models ?? undefined,
    workerType: p.worker_type,
    labels: p.labels,
    priority: p.priority,
    cost: p.cost,
    bootstrapPort: p.bootstrap_port,
    disableHealthCheck: p.disable_health_check,
    apiKey: null,
  };
}

/** Decodes and checks a published worker; null when the value is not a well-formed one. */
export function decodePublished(bytes: Uint8Array): PublishedWorker | null {
  try {
    const p = JSON.parse(dec.decode(bytes)) as Record<string, unknown>;
    const str = (v: unknown) => typeof v === "string";
    const num = (v: unknown) => typeof v === "number" && Number.isFinite(v);
    const labels = p.labels ?? {};
    if (!str(p.url) || !str(p.owner) || typeof p.healthy !== "boolean") return null;
    if (!["regular", "prefill", "decode"].includes(p.worker_type as string)) return null;
    if (p.models !== null && !(Array.isArray(p.models) && p.models.every(str))) return null;
    if (typeof labels !== "object" || Array.isArray(labels)) return null;
    if (!Object.values(labels as object).every(str)) return null;
    if (!num(p.priority) || !num(p.cost)) return null;
    if (p.bootstrap_port !== null && !num(p.bootstrap_port)) return null;
    return {
      url: normalizeWorkerUrl(p.url as string),
      models: p.models as string[] | null,
      worker_type: p.worker_type as PublishedWorker["worker_type"],
      labels: labels as Record<string, string>,
      priority: p.priority as number,
      cost: p.cost as number,
      bootstrap_port: p.bootstrap_port as number | null,
      disable_health_check: p.disable_health_check === true,
      healthy: p.healthy as boolean,
      owner: p.owner as string,
    };
  } catch {
    return null; // not JSON, or normalizeWorkerUrl refused the URL
  }
}

/** Whether `url` points at this machine (a peer importing it would reach itself). */
export function isLoopbackUrl(url: string): boolean {
  try {
    const h = new URL(url).hostname.replace(/^\[|\]$/g, "");
    return h === "localhost" || h === "::1" || /^127\./.test(h);
  } catch {
    return false;
  }
}

/** Bridges one router's registry and the mesh store. */
export class WorkerSync {
  readonly #d: WorkerSyncDeps;
  readonly #warned = new Set<string>();
  /** Imports the egress allow-list refused, as `key url`, each warned about once. */
  readonly #refused = new Set<string>();
  #unsubscribe: () => void = () => {};
  #cancel: () => void = () => {};
  #stopped = false;

  /** Builds the adapter; `start()` publishes and subscribes. */
  constructor(deps: WorkerSyncDeps) {
    this.#d = deps;
  }

  /** Publishes the local workers, imports what the store holds, and starts reconciling. */
  start(): void {
    const d = this.#d;
    this.#unsubscribe = d.registry.subscribe((e) => {
      if (e.kind === "removed" && e.worker.origin === "mesh") return this.#reimport(e.worker);
      if (e.worker.origin !== "local") return;
      if (e.kind === "removed") d.store.write(WORKERS_NS, e.worker.id, null, d.clock.now());
      else this.#publish(e.worker);
    });
    d.store.onChange((e, origin) => {
      if (!this.#stopped && origin === "remote" && e.ns === WORKERS_NS) this.#onKey(e.key);
    });
    this.reconcile();
    this.#schedule();
  }

  /** Stops reconciling (subscriptions end with the router). */
  stop(): void {
    this.#stopped = true;
    this.#unsubscribe();
    this.#cancel();
  }

  /**
   * Publishes every local worker whose published state is out of date, re-imports every live
   * key (recovering missed changes and local deletes of imports), and removes imports whose
   * owner's key is gone.
   */
  reconcile(): void {
    const d = this.#d;
    for (const w of d.registry.all()) if (w.origin === "local") this.#publish(w);
    for (const [key] of d.store.live(WORKERS_NS)) this.#onKey(key);
    for (const w of d.registry.all()) {
      if (w.origin === "mesh" && w.meshKey && !d.store.get(WORKERS_NS, w.meshKey)) {
        this.#onKey(w.meshKey);
      }
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#d.clock.after(this.#d.reconcileMs ?? 30_000, () => {
      this.reconcile();
      this.#schedule();
    });
  }

  #publish(w: Worker): void {
    const d = this.#d;
    if (w.status === "draining") return;
    const value = JSON.stringify(publishedOf(w, d.router));
    const current = d.store.get(WORKERS_NS, w.id);
    if (current && dec.decode(current) === value) return;
    if (isLoopbackUrl(w.url) && !this.#warned.has(w.id)) {
      this.#warned.add(w.id);
      d.log.warn("publishing a loopback worker URL to the mesh: peers would reach themselves", {
        worker: w.url,
      });
    }
    d.store.write(WORKERS_NS, w.id, enc.encode(value), d.clock.now());
  }

  /** Brings the registry in line with the store's current value of `key`. */
  #onKey(key: string): void {
    const d = this.#d;
    const own = d.registry.get(key);
    const bytes = d.store.get(WORKERS_NS, key);
    if (!bytes) {
      if (own && own.origin === "local") {
        // Only the owner removes: a peer's tombstone of our worker is answered by publishing.
        d.log.info("re-publishing a worker a peer removed; only its owner removes it", {
          worker: own.url,
        });
        return this.#republish(own);
      }
      const imported = d.registry.all().find((w) => w.origin === "mesh" && w.meshKey === key);
      if (!imported) return;
      // The same URL may live on under another key (its owner restarted with a new worker id):
      // follow that one instead of dropping the worker.
      for (const [k, v] of d.store.live(WORKERS_NS)) {
        const q = decodePublished(v);
        if (q?.url !== imported.url) continue;
        imported.meshKey = k;
        return this.#nudge(imported, q);
      }
      d.log.info("removing an imported worker: its owner removed it", { worker: imported.url });
      d.manager.remove(imported.id);
      return;
    }
    const p = decodePublished(bytes);
    if (!p) return void d.log.warn("ignoring an undecodable published worker", { key });
    if (own && own.origin === "local") return;
    if (p.owner === d.router) {
      // Published by this router's previous life (a restart mints new ids): only the owner
      // removes, and this router is it.
      d.log.info("removing a worker this router published before it restarted", { worker: p.url });
      d.store.write(WORKERS_NS, key, null, d.clock.now());
      return;
    }
    const existing = d.registry.byUrl(p.url);
    if (existing) {
      if (existing.origin === "local") return;
      if (existing.status === "draining") return; // re-imported once it has left (see start)
      if (existing.meshKey !== key) {
        // Two live keys for one URL (an owner restarted under a new name, say): follow the
        // newer write, which is the owner that is alive.
        const held = existing.meshKey ? d.store.entry(WORKERS_NS, existing.meshKey) : undefined;
        const mine = d.store.entry(WORKERS_NS, key)!;
        if (held?.value && compareVersions(held, mine) > 0) return;
        existing.meshKey = key;
      }
      return this.#nudge(existing, p);
    }
    let w: Worker;
    try {
      w = d.manager.add(specOf(p), { meshKey: key, status: p.healthy ? "ready" : "not_ready" });
    } catch (e) {
      if (!(e instanceof EgressRefusedError)) throw e;
      // The owner may reach it; this router's allow-list does not. Said once per key and URL.
      const said = `${key} ${p.url}`;
      if (!this.#refused.has(said)) {
        this.#refused.add(said);
        d.log.warn("mesh worker refused by the egress allow-list", {
          worker: p.url,
          owner: p.owner,
          reason: e.message,
        });
      }
      return;
    }
    d.log.info("imported a worker from the mesh", {
      worker: w.url,
      owner: p.owner,
      status: w.status,
    });
  }

  /**
   * An import left the registry. If its owner meanwhile published the URL again under a new key
   * (removed and re-added while this router drained the old import), import that at once; a
   * local delete or a claim of the same key waits for the reconcile (the rules above).
   */
  #reimport(gone: Worker): void {
    if (this.#stopped) return;
    for (const [k, v] of this.#d.store.live(WORKERS_NS)) {
      if (k !== gone.meshKey && decodePublished(v)?.url === gone.url) return this.#onKey(k);
    }
  }

  /** The owner's health nudges an import: promotes pending or not_ready, demotes ready. */
  #nudge(w: Worker, p: PublishedWorker): void {
    const to = p.healthy && (w.status === "pending" || w.status === "not_ready")
      ? "ready"
      : !p.healthy && w.status === "ready"
      ? "not_ready"
      : null;
    if (!to) return;
    w.setStatus(to);
    this.#d.log.info("imported worker follows its owner's health", { worker: w.url, status: to });
  }

  #republish(w: Worker): void {
    const d = this.#d;
    d.store.write(
      WORKERS_NS,
      w.id,
      enc.encode(JSON.stringify(publishedOf(w, d.router))),
      d.clock.now(),
    );
  }
}
