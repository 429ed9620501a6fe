/**
 * The HA mesh's part of the composition root: from the mesh flags it builds the router's
 * `MeshNode` on the gRPC transport (mTLS when configured), registers the mesh metrics in the
 * gateway's registry, wires the adapters (worker, tree, pin, tenant-limit, characters-per-token
 * and load sync) to the node's streams and store, and answers `GET /mesh/status`. A mesh that
 * cannot bind its port logs and counts, and the router stops (`listen.ts`).
 */

import type { MeshConfig } from "../../config/config.ts";
import type { Feature } from "../../core/feature.ts";
import type { Logger } from "../../core/log.ts";
import { MeshMetrics } from "../mesh_metrics.ts";
import { MeshNode } from "../node.ts";
import { swimConfigOf } from "../swim_config.ts";
import { MeshCertificates } from "../transport/certificates.ts";
import type { MeshPem } from "../../tls/pem.ts";
import { CertificateReloader, type ReloadOutcome } from "../../tls/reload.ts";
import type {
  FrameConn,
  MeshTransport,
  ReplyCallback,
  TransportHandlers,
} from "../transport/transport.ts";
import type { MeshRequest } from "../wire.ts";
import type { Metrics } from "../../metrics/metrics.ts";
import { WORKERS_NS, WorkerSync } from "./worker_sync.ts";
import { type TreeCounter, TreeSync } from "./tree_sync.ts";
import { PINS_NS, PinSync } from "./pin_sync.ts";
import { RATE_LIMIT_NS, RateLimitSync } from "./rate_limit_sync.ts";
import { RATIO_NS, RatioSync } from "./ratio_sync.ts";
import { LoadSync } from "./load_sync.ts";
import type { TextRatios } from "../../workers/text_ratios.ts";
import type { TenantLimiter } from "../../limits/limiter.ts";
import type { PolicyReplicas } from "../../policies/replicas.ts";
import { LwwStore } from "../store/lww_store.ts";
import { StoreSync } from "../store/store_sync.ts";
import { type Clock, seededRandom } from "../../core/clock.ts";
import type { WorkerManager } from "../../workers/manager.ts";
import type { WorkerRegistry } from "../../workers/registry.ts";

const NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** SMG's default name: `Mesh_` and four random alphanumerics. */
export function randomMeshName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return "Mesh_" + [...bytes].map((b) => NAME_CHARS[b % NAME_CHARS.length]).join("");
}

/**
 * Loads grpc-js only when the mesh starts: a gateway without `--enable-mesh` never imports it
 * (nor needs its environment variables allowed).
 */
class DeferredTransport implements MeshTransport {
  #t: MeshTransport | null = null;
  readonly #make: () => Promise<MeshTransport>;
  constructor(make: () => Promise<MeshTransport>) {
    this.#make = make;
  }
  async serve(h: TransportHandlers): Promise<void> {
    this.#t = await this.#make();
    await this.#t.serve(h);
  }
  request(address: string, req: MeshRequest, timeoutMs: number, done: ReplyCallback): void {
    if (this.#t) return this.#t.request(address, req, timeoutMs, done);
    queueMicrotask(() => done({ code: "closed", message: "mesh not started" }, null));
  }
  openStream(address: string): FrameConn {
    if (!this.#t) throw new Error("mesh not started");
    return this.#t.openStream(address);
  }
  forget(address: string): void {
    this.#t?.forget(address);
  }
  async close(): Promise<void> {
    await this.#t?.close();
  }
}

/** A router's mesh as a feature, built but not started. */
export interface Mesh extends Feature {
  /** The router. */
  node: MeshNode;
  /** Why the mesh is off although enabled (its port could not be bound), else null. */
  failure: string | null;
  /** The replicated store (workers). */
  store: LwwStore;
  /** Cache-aware tree sync. */
  trees: TreeSync;
  /** The mesh's metrics (the status page reads the replication lag). */
  metrics: MeshMetrics;
  /**
   * Reads the router's mTLS certificate and key again (SIGHUP); absent without mTLS. Its files
   * are watched too, once the mesh has started.
   */
  reload?(reason: string): Promise<ReloadOutcome>;
  /** Stops the adapters, the replication and the router (once a start under way is over). */
  stop(): Promise<void>;
  /** Starts serving and gossiping; a bind failure is logged and counted, not thrown. */
  start(): Promise<void>;
}

/** What the mesh replicates: this router's workers and its policies' shared state. */
export interface MeshState {
  /** The registry. */
  registry: WorkerRegistry;
  /** Adds and removes workers. */
  manager: WorkerManager;
  /** The policies' shared trees and pins. */
  replicas: PolicyReplicas;
  /** `--max-idle-secs`: pins idle this long leave the store. */
  pinMaxIdleSecs: number;
  /** The gateway's clock: the mesh's timers run on it. */
  clock: Clock;
  /** Cluster-wide tenant limits: the limiter and the publish interval (ms); null: per router. */
  limits?: { limiter: TenantLimiter; syncMs: number } | null;
  /** Characters per token per model, shared with the peers (default: not shared). */
  ratios?: TextRatios;
  /** The mesh's mTLS material, read and checked (`loadTls`); absent or null: plaintext. */
  tls?: MeshPem | null;
}

/** How often a router publishes its characters per token (ms). */
const RATIO_SYNC_MS = 10_000;

/** Tree-sync counters as metric series. */
function treeCounter(mm: MeshMetrics, what: TreeCounter, n: number): void {
  if (what === "malformed") return mm.rejected.with("malformed").inc(n);
  if (what === "entries_skipped") return mm.treePages.with("entries_skipped").inc(n);
  if (what === "requests_refused") return mm.treeRepairs.with("refused").inc(n);
  const [family, result] = what.split("_", 2) as [string, string];
  if (family === "deltas") mm.treeDeltas.with(result).inc(n);
  else if (family === "delta") mm.treeBytes.with("deltas").inc(n);
  else if (family === "page") mm.treeBytes.with("pages").inc(n);
  else if (family === "pages") mm.treePages.with(result).inc(n);
  else if (family === "corrections") mm.treeCorrections.with(result).inc(n);
  else mm.treeRepairs.with(result).inc(n);
}

/** Builds the mesh of `m` (which must be enabled and validated). */
export function createMesh(
  m: MeshConfig,
  metrics: Metrics,
  log: Logger,
  seed: number,
  state: MeshState,
): Mesh {
  const name = m.serverName ?? randomMeshName();
  const address = `${m.advertiseHost ?? m.host}:${m.port}`;
  const mm = new MeshMetrics(metrics.registry);
  const mlog = log.child({ module: "mesh", name });
  const pem = state.tls ?? null;
  const certs = pem ? new MeshCertificates(pem.ca, pem.own.cert, pem.own.key) : null;
  // The router's certificate is reloaded as the main port's is: on a change of its files, and
  // on SIGHUP (`reload`); the CA is read once.
  const reloader = pem && m.tlsCert !== null && m.tlsKey !== null
    ? new CertificateReloader({
      certPath: m.tlsCert,
      keyPath: m.tlsKey,
      flags: { cert: "--mesh-tls-cert", key: "--mesh-tls-key" },
      current: pem.own,
      apply: (next) => certs!.update(next.cert, next.key),
      log: log.child({ module: "mesh" }),
      clock: state.clock,
    })
    : null;
  const tls = certs;
  const transport = new DeferredTransport(async () => {
    const { GrpcTransport } = await import("../transport/grpc.ts");
    return new GrpcTransport({ host: m.host, port: m.port, tls, clock: state.clock });
  });
  const node = new MeshNode({
    name,
    address,
    seeds: m.peerUrls,
    swim: swimConfigOf(m),
    streams: {
      heartbeatMs: m.heartbeatSecs * 1000,
      idleTimeoutMs: m.streamIdleTimeoutSecs * 1000,
      queueSize: m.streamQueueSize,
      reopenBackoffMs: 1000,
    },
    transport,
    clock: state.clock,
    log: mlog,
    metrics: mm,
    randomSeed: seed,
  });
  // A replica id per process: a restarted router is a new writer, never confused with its past.
  const store = new LwwStore(`${name}#${crypto.randomUUID().slice(0, 8)}`, {
    namespaces: new Set([WORKERS_NS, PINS_NS, RATE_LIMIT_NS, RATIO_NS]),
  });
  const storeSync = new StoreSync({
    store,
    clock: state.clock,
    log: mlog,
    random: seededRandom(seed ^ 0x5bd1e995),
    count: (what, ns) => {
      if (what === "anti_entropy") mm.antiEntropy.with().inc();
      else mm.storeOps.with(ns, what).inc();
    },
    lag: (ms) => mm.storeAckLag.with().observe(ms / 1000),
    members: () => node.members().flatMap((x) => (x.name === name ? [] : [x.name])),
  });
  const trees = new TreeSync({
    replicas: state.replicas,
    clock: state.clock,
    log: mlog,
    random: seededRandom(seed ^ 0x27d4eb2f),
    name,
    roundMs: m.probeIntervalMs,
    count: (what, n) => treeCounter(mm, what, n),
  });
  store.onChange(() => {
    for (const [ns, c] of store.counts()) {
      mm.storeKeys.with(ns, "live").set(c.live);
      mm.storeKeys.with(ns, "tombstones").set(c.tombstones);
    }
  });
  const loads = m.loadSyncMs > 0
    ? new LoadSync({
      workers: () => state.registry.all(),
      clock: state.clock,
      intervalMs: m.loadSyncMs,
      log: mlog,
      count: (what, n) =>
        what === "bytes_sent" ? mm.loadBytes.with().inc(n) : mm.loadReports.with(what).inc(n),
    })
    : null;
  node.streams.onPeer((peer, open) => {
    storeSync.peerChanged(peer, open);
    trees.peerChanged(peer, open);
    loads?.peerChanged(peer, open);
  });
  node.streams.onEnvelope((peer, type, payload) => {
    storeSync.onEnvelope(peer, type, payload);
    trees.onEnvelope(peer, type, payload);
    loads?.onEnvelope(peer, type, payload);
  });
  const workers = new WorkerSync({
    registry: state.registry,
    manager: state.manager,
    store,
    router: name,
    clock: state.clock,
    log: mlog,
  });
  const pins = new PinSync({
    replicas: state.replicas,
    store,
    clock: state.clock,
    log: mlog,
    maxIdleMs: state.pinMaxIdleSecs * 1000,
  });
  const limits = state.limits
    ? new RateLimitSync({
      limiter: state.limits.limiter,
      store,
      router: name,
      clock: state.clock,
      syncMs: state.limits.syncMs,
      log: mlog,
      count: (kind, n) => metrics.tenantCluster.with(kind).inc(n),
    })
    : null;
  const ratios = state.ratios
    ? new RatioSync({
      ratios: state.ratios,
      store,
      router: name,
      clock: state.clock,
      intervalMs: RATIO_SYNC_MS,
      log: mlog,
    })
    : null;
  let started: Promise<void> = Promise.resolve();
  const mesh: Mesh = {
    name: "mesh",
    node,
    failure: null,
    store,
    trees,
    metrics: mm,
    ...(reloader ? { reload: (reason: string) => reloader.reload(reason) } : {}),
    async stop() {
      await started;
      await reloader?.stop();
      workers.stop();
      trees.stop();
      loads?.stop();
      pins.stop();
      limits?.stop();
      ratios?.stop();
      storeSync.stop();
      await node.stop();
    },
    start() {
      return started = serve();
    },
  };
  const serve = async () => {
    try {
      await node.start();
      storeSync.attach(node.streams);
      trees.attach(node.streams);
      loads?.attach(node.streams);
      workers.start();
      pins.start();
      limits?.start();
      ratios?.start();
      reloader?.start();
      mlog.info("mesh listening", {
        bind: `${m.host}:${m.port}`,
        advertise: address,
        peers: m.peerUrls.join(" "),
        tls: m.tlsCaCert !== null,
      });
    } catch (e) {
      mm.rejected.with("bind").inc();
      mesh.failure = `mesh server failed on ${m.host}:${m.port}: ${(e as Error).message}`;
      mlog.error("mesh server failed; the router stops", {
        bind: `${m.host}:${m.port}`,
        err: (e as Error).message,
      });
      await node.stop();
    }
  };
  return mesh;
}
