/**
 * Kubernetes service discovery's part of the composition root: with `--service-discovery`, the
 * pod API (`lib/discovery/kube.ts`, which loads `@kubernetes/client-node` only now), a
 * list-and-watch loop over the worker selector (or each PD leg's), and the reconciler that
 * registers and removes workers, with SMG's `smg_discovery_*` metrics. A configuration that
 * cannot be loaded is logged and leaves the gateway serving what it has (flags and API
 * workers); an API server that cannot be reached is retried by the loop.
 */

import type { GatewayConfig } from "../config/config.ts";
import { type Clock, every } from "../core/clock.ts";
import { ConfigError } from "../core/errors.ts";
import type { Feature } from "../core/feature.ts";
import type { Logger } from "../core/log.ts";
import { connectPods, type PodApi } from "./kube.ts";
import { type Pod, selectorQuery } from "./pods.ts";
import { PodWatch } from "./watch.ts";
import { WorkerDiscovery } from "./worker_discovery.ts";
import { RouterDiscovery, type RouterSink } from "./router_discovery.ts";
import { FastCounter, FastGauge, FastHistogram } from "../metrics/fast.ts";
import { DURATION_BUCKETS, type Metrics } from "../metrics/metrics.ts";
import type { WorkerManager } from "../workers/manager.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

const SOURCE = "kubernetes";

/** SMG's discovery metrics. */
export class DiscoveryMetrics {
  readonly registrations: FastCounter;
  readonly deregistrations: FastCounter;
  readonly sync: FastHistogram;
  readonly discovered: FastGauge;
  /** Registers them in `m`'s registry. */
  constructor(m: Metrics) {
    const r = m.registry;
    this.registrations = new FastCounter(
      r,
      "smg_discovery_registrations_total",
      "Discovered workers registered, by result",
      ["source", "result"],
    );
    this.deregistrations = new FastCounter(
      r,
      "smg_discovery_deregistrations_total",
      "Discovered workers deregistered, by reason (deleted, not_ready, gone)",
      ["source", "reason"],
    );
    this.sync = new FastHistogram(
      r,
      "smg_discovery_sync_duration_seconds",
      "Time to apply one pod list or event to the registry",
      ["source"],
      DURATION_BUCKETS,
    );
    this.discovered = new FastGauge(
      r,
      "smg_discovery_workers_discovered",
      "Discovered workers registered now",
      ["source"],
    );
  }
}

/** Discovery as a feature, built but not started. */
export interface Discovery extends Feature {
  /**
   * Connects and starts watching in the background (loading the Kubernetes client takes a
   * while; the gateway serves meanwhile); a failure to connect is logged, not thrown.
   */
  start(): void;
  /** Stops watching, once connecting is over; discovered workers stay registered. */
  stop(): Promise<void>;
}

/** Builds worker discovery for `c` (which must have it enabled and be validated). */
export function createDiscovery(
  c: GatewayConfig,
  metrics: Metrics,
  log: Logger,
  state: {
    registry: WorkerRegistry;
    manager: WorkerManager;
    /** The mesh's membership, for `--router-selector`. */
    routers?: RouterSink;
    /** The gateway's clock: the watches' timers and the resync. */
    clock: Clock;
  },
): Discovery {
  const d = c.discovery;
  // client-node reads the whole environment (its HTTP stack enumerates it): without full env
  // access it cannot even load, so refuse at start rather than serve without discovery.
  if (Deno.permissions.querySync({ name: "env" }).state !== "granted") {
    throw new ConfigError(
      "--service-discovery: run with --allow-env (the Kubernetes client reads the environment) " +
        "and --allow-read for the kubeconfig or /var/run/secrets/kubernetes.io/serviceaccount",
    );
  }
  const dlog = log.child({ module: "discovery" });
  const mm = new DiscoveryMetrics(metrics);
  const reconciler = new WorkerDiscovery({
    config: d,
    pd: c.pd.enabled,
    registry: state.registry,
    manager: state.manager,
    log: dlog,
    counters: {
      registered: (result) => mm.registrations.with(SOURCE, result).inc(),
      deregistered: (reason) => mm.deregistrations.with(SOURCE, reason).inc(),
      synced: (s) => mm.sync.with(SOURCE).observe(s),
      discovered: (n) => mm.discovered.with(SOURCE).set(n),
    },
  });
  let api: PodApi | null = null;
  const watches: PodWatch[] = [];
  // PD: one watch per leg, each leg's pods kept, so that a relist of one leg (which replaces
  // what is known) does not forget the other's.
  const legs: Map<string, Pod>[] = [];
  const allPods = () => legs.flatMap((m) => [...m.values()]);
  let stopResync = () => {};
  const selectors = c.pd.enabled
    ? [d.prefillSelector, d.decodeSelector]
    : Object.keys(d.selector).length > 0
    ? [d.selector]
    : [];
  const routers = state.routers && Object.keys(d.routerSelector).length > 0
    ? new RouterDiscovery(state.routers, c.mesh.port)
    : null;
  const connect = async () => {
    try {
      api = await connectPods(d.namespace);
    } catch (e) {
      dlog.error("service discovery is off: no Kubernetes configuration", { err: String(e) });
      return;
    }
    dlog.info("watching Kubernetes pods", {
      server: api.server,
      config: api.origin,
      namespace: d.namespace ?? "(all)",
      selectors: selectors.map(selectorQuery).join(" | "),
      routers: routers ? selectorQuery(d.routerSelector) : "",
    });
    if (routers) {
      const w = new PodWatch({
        name: `router pods ${selectorQuery(d.routerSelector)}`,
        source: api.source(selectorQuery(d.routerSelector)),
        log: dlog,
        clock: state.clock,
        handlers: {
          onList: (list) => routers.onList(list),
          onEvent: (type, p) => routers.onEvent(type, p),
        },
      });
      watches.push(w);
      w.start();
    }
    for (const sel of selectors) {
      const pods = new Map<string, Pod>();
      const w = new PodWatch({
        name: `pods ${selectorQuery(sel)}`,
        source: api.source(selectorQuery(sel)),
        log: dlog,
        clock: state.clock,
        handlers: {
          onList: (list) => {
            pods.clear();
            for (const p of list) if (p.metadata?.uid) pods.set(p.metadata.uid, p);
            reconciler.onList(allPods());
          },
          onEvent: (type, p) => {
            const uid = p.metadata?.uid;
            if (uid) {
              if (type === "DELETED") pods.delete(uid);
              else pods.set(uid, p);
            }
            // PD: a pod that left this leg's selector may now be in the other leg's.
            const other = type === "DELETED" && uid
              ? legs.find((m) => m !== pods && m.has(uid))?.get(uid)
              : undefined;
            if (other) reconciler.onEvent("MODIFIED", other);
            else reconciler.onEvent(type, p);
          },
        },
      });
      legs.push(pods);
      watches.push(w);
      w.start();
    }
    if (selectors.length > 0) stopResync = every(state.clock, 10_000, () => reconciler.resync());
  };
  let started: Promise<void> = Promise.resolve();
  return {
    name: "discovery",
    start() {
      started = connect();
    },
    async stop() {
      await started;
      stopResync();
      await Promise.all(watches.map((w) => w.stop()));
      api?.close();
    },
  };
}
