/**
 * The composition root: the only place that wires modules together. From a `GatewayConfig` it
 * builds, in order: the clients toward workers, the registry and its worker lifecycle, the
 * policies, the health checker and load monitor, the manager, the tenant limits, the request path
 * (proxy, routes, entry) and the status page; the optional parts are features (`Feature`, built
 * by their folders' `feature.ts`) held in one list in dependency order, started by `start()`,
 * reloaded on SIGHUP, asked for gauges at each scrape and stopped in reverse by `stop()`.
 * Listening and signals live in `listen.ts`. One `Clock` (`systemClock`, or a test's
 * `FakeClock`) is handed to every loop and timer: health, loads, drains, admission, deadlines,
 * retry backoff, the upstream pool, the mesh, discovery, PD prefill drains and shutdown.
 */

import type { GatewayConfig } from "../config/config.ts";
import { egressPolicy } from "../config/egress.ts";
import type { EgressPolicy } from "../core/egress.ts";
import { type Clock, osRandom, type Random, seededRandom, systemClock } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import { Metrics } from "../metrics/metrics.ts";
import type { Policy } from "../policies/mod.ts";
import type { LastDecision } from "../policies/policy.ts";
import { PolicyReplicas } from "../policies/replicas.ts";
import { PolicyRegistry } from "../policies/registry.ts";
import { Admission } from "../proxy/admission.ts";
import { InferenceProxy } from "../proxy/proxy.ts";
import type { Upstream } from "../upstream/types.ts";
import type { FetchFn } from "../workers/http.ts";
import { HealthChecker } from "../workers/health.ts";
import { LoadMonitor } from "../workers/load_monitor.ts";
import { WorkerManager } from "../workers/manager.ts";
import { WorkerRegistry } from "../workers/registry.ts";
import { refreshWorkerGauges } from "./gauges.ts";
import { policyObserver } from "./observers.ts";
import { buildPolicies } from "./policies.ts";
import { addConfiguredWorkers, followWorkers } from "./worker_events.ts";
import { createEntry, type Entry } from "./routes.ts";
import { mainRoutes } from "./main_routes.ts";
import { RequestInbound, toResponse } from "./inbound.ts";
import { createMesh, type Mesh } from "../mesh/adapters/feature.ts";
import { createDiscovery, type Discovery } from "../discovery/feature.ts";
import type { GrpcClientFactory } from "../proxy/grpc/workers.ts";
import { grpcBackend, workerClients } from "./worker_clients.ts";
import { createKvIndexes, KvEvents } from "../kv/feature.ts";
import { type Feature, loopFeature } from "../core/feature.ts";
import { meshStatus } from "./mesh_status.ts";
import type { GatewayTokenizer } from "../tokenizer/tokenizer.ts";
import { NO_TLS, type TlsMaterial, wantsTls } from "../tls/pem.ts";
import { WorkerTlsSource } from "../tls/worker_tls.ts";
import { workerTlsReload } from "../tls/feature.ts";
import type { TenantLimiter } from "../limits/limiter.ts";
import { createLimiter, createTenants } from "../limits/feature.ts";
import { createDashboard, type Dashboard } from "../dashboard/feature.ts";
import { metricsPortHandler } from "./metrics_port.ts";
import { TextRatios } from "../workers/text_ratios.ts";
import { createTracing, type Tracing, type TracingInit } from "../tracing/feature.ts";

/** What a gateway is built from; everything but `config` and `log` has a production default. */
export interface GatewayOptions {
  /** Validated configuration. */
  config: GatewayConfig;
  /** Root logger. */
  log: Logger;
  /**
   * `fetch` toward HTTP workers for health, loads and info (the HTTP worker control; default:
   * fetch over a keep-alive pool); also the inference client when `upstream` is not given
   * (tests' scripted workers).
   */
  fetch?: FetchFn;
  /** Inference client toward workers (default: `Http1Client`). */
  upstream?: Upstream;
  /** The clock of every loop and timer (default `systemClock`; tests pass a `FakeClock`). */
  clock?: Clock;
  /** Randomness (default: seeded from `--random-seed` or the OS). */
  random?: Random;
  /**
   * gRPC workers: the tokenizer of `--model-path` / `--tokenizer-path`, loaded, and the client
   * factory (both imported only when one is given, as grpc-js and the tokenizers cost at start).
   */
  grpc?: { tokenizer: GatewayTokenizer; client: GrpcClientFactory };
  /**
   * The TLS files the config names, read and checked by `loadTls(config)` (required when the
   * config names any; default none): the main port's certificate, and the CAs and client
   * certificate every client toward workers uses (HTTP/1.1, fetch, gRPC).
   */
  tls?: TlsMaterial;
  /** Tracing (`--enable-trace`; default none): see `TracingInit`. */
  tracing?: TracingInit | null;
}

/** A gateway instance. */
export class Gateway {
  /** Configuration. */
  readonly config: GatewayConfig;
  /** Workers. */
  readonly registry = new WorkerRegistry();
  /** Metrics. */
  readonly metrics = new Metrics();
  /** Worker lifecycle. */
  readonly manager: WorkerManager;
  /** Which hosts workers may be registered at; `listen.ts` gives it the bound ports. */
  readonly egress: EgressPolicy;
  /** Health probes. */
  readonly checker: HealthChecker;
  /** Load polling. */
  readonly monitor: LoadMonitor;
  /** The default routing policy (`--policy`). */
  readonly policy: Policy;
  /** Which policy routes which model (worker `policy` labels). */
  readonly policies: PolicyRegistry;
  /** KV-event mode (`--kv-events auto`): the workers' cache events and their indexes, or null. */
  readonly kv: KvEvents | null;
  /** The HA mesh (`--enable-mesh`), or null. */
  readonly mesh: Mesh | null;
  /** Kubernetes worker discovery (`--service-discovery`), or null. */
  readonly discovery: Discovery | null;
  /** Per-tenant rate limits (`--tenant-rate-limit-enabled`), or null. */
  readonly limits: TenantLimiter | null;
  /** The status page (`GET /dashboard`) and its routing history. */
  readonly dashboard: Dashboard;
  /** Tracing (`--enable-trace`), or null. */
  readonly tracing: Tracing | null;
  /** Characters per token per model and worker, learned from the answers. */
  readonly ratios = new TextRatios();
  /** The main port's entry over the gateway's exchange types (the own front calls it). */
  readonly entry: Entry;
  /** The metrics port's handler: `/metrics`, and the status page. */
  readonly handleMetrics: (req: Request) => Promise<Response>;
  /** The one clock every loop and timer of this gateway runs on. */
  readonly clock: Clock;
  /** TLS material: the main port's certificate at start, and what workers are reached with. */
  readonly tls: TlsMaterial;
  readonly #log: Logger;
  readonly #loops = new AbortController();
  readonly #features: Feature[];
  #draining = false;
  readonly #closeClient: () => void;
  readonly #proxy: InferenceProxy;

  /** Wires every module; nothing runs until `start()`. */
  constructor(opts: GatewayOptions) {
    const config = this.config = opts.config;
    const log = this.#log = opts.log;
    const clock = this.clock = opts.clock ?? systemClock;
    const random = opts.random ??
      (config.randomSeed === null ? osRandom() : seededRandom(config.randomSeed));
    if (!opts.tls && wantsTls(config)) {
      throw new Error("the config names TLS files: pass the material loadTls(config) read");
    }
    const tls = this.tls = opts.tls ?? NO_TLS;
    const metrics = this.metrics;
    const resends = metrics.upstreamSendRetries.with();
    const workerTls = new WorkerTlsSource(tls.worker);
    const clients = workerClients({
      config,
      tls: workerTls,
      clock,
      onResend: () => resends.inc(),
      fetch: opts.fetch,
      upstream: opts.upstream,
      grpc: opts.grpc?.client,
      log,
    });
    this.#closeClient = clients.close;
    const { upstream, grpc: grpcWorkers } = clients;
    // Health, models, loads, info and flush: HTTP workers over fetch, gRPC ones over their RPCs.
    const control = clients.control;
    const registry = this.registry;

    const replicas = new PolicyReplicas();
    // The policies' last branch, noted on each pick (an attempt span's smg.route.branch).
    const lastDecision: LastDecision = { branch: null };
    const kvLog = log.child({ module: "kv" });
    // KV-event mode's indexes come before the policies that read them; `KvEvents` fills them.
    const kvIndexes = config.cacheAware.kvEvents === "auto"
      ? createKvIndexes({ config, metrics, log: kvLog, clock })
      : null;
    const { policies, pd } = buildPolicies(config, {
      random,
      now: () => clock.now(),
      log: log.child({ module: "policy" }),
      config,
      observer: policyObserver(metrics, lastDecision),
      replicas,
      cacheIndex: (model: string) => kvIndexes?.view(model) ?? null,
    }, registry);
    this.policies = policies;
    this.policy = policies.default;
    this.checker = new HealthChecker({
      config: config.health,
      registry,
      control,
      clock,
      log: log.child({ module: "health" }),
      onProbe: (w, ok) => metrics.healthChecks.with(w.type, ok ? "success" : "failure").inc(),
    });
    this.monitor = new LoadMonitor({
      config: config.loadMonitor,
      registry,
      control,
      clock,
      log: log.child({ module: "load" }),
      wanted: () => policies.all().some((p) => p.needs.backendLoads),
    });
    this.egress = egressPolicy(config);
    const manager = this.manager = new WorkerManager({
      registry,
      egress: this.egress,
      health: config.health,
      circuitBreaker: config.circuitBreaker,
      clock,
      log: log.child({ module: "workers" }),
    });
    const flushMs = Math.min(5000, config.shutdownGracePeriodSecs * 1000);
    const tracing = this.tracing = createTracing(opts.tracing, { clock, log, metrics, flushMs });
    const rl = config.tenantRateLimit;
    const limits = this.limits = createLimiter(config, clock, metrics); // null when off
    this.mesh = config.mesh.enabled
      ? createMesh(config.mesh, metrics, log, Math.floor(random() * 2 ** 32), {
        registry,
        manager,
        replicas,
        pinMaxIdleSecs: config.manual.maxIdleSecs,
        clock,
        limits: limits && rl.scope === "cluster" ? { limiter: limits, syncMs: rl.syncMs } : null,
        ratios: this.ratios,
        tls: tls.mesh,
      })
      : null;
    const mesh = this.mesh;
    this.discovery = config.discovery.enabled
      ? createDiscovery(config, metrics, log, {
        registry,
        manager,
        routers: mesh ? (n, a, st) => mesh.node.discovered(n, a, st) : undefined,
        clock,
      })
      : null;
    followWorkers(registry, {
      checker: this.checker,
      manager,
      grpcWorkers,
      metrics,
      log,
      removeUnhealthy: config.health.removeUnhealthy,
    });

    const kv = this.kv = kvIndexes
      ? new KvEvents({
        monitor: kvIndexes,
        config,
        registry,
        grpc: opts.grpc ? grpcWorkers : null,
        cacheAware: (model) => policies.forModel(model).name === "cache_aware",
        metrics,
        log: kvLog,
        clock,
      })
      : null;
    const proxy = this.#proxy = new InferenceProxy({
      config,
      registry,
      policies,
      metrics,
      log: log.child({ module: "proxy" }),
      clock,
      random,
      upstream,
      admission: new Admission(config.admission, metrics, clock),
      limits: limits ?? undefined,
      pd,
      grpc: opts.grpc
        ? grpcBackend(grpcWorkers, opts.grpc.tokenizer, config.tokenizerThreads, log, clock)
        : undefined,
      routesOnTokens: kv ? (model) => kv.routesOnTokens(model) : undefined,
      ratios: this.ratios,
      lastDecision,
    });
    const draining = () => this.#draining;
    this.dashboard = createDashboard({
      registry,
      metrics,
      clock,
      draining,
      mesh,
      policy: this.policy.name,
      ratios: this.ratios,
      tracing: tracing !== null,
    });
    this.handleMetrics = metricsPortHandler(this);
    this.entry = createEntry({
      routes: mainRoutes({
        inference: (inb, endpoint, ctx) => proxy.handle(inb, endpoint, ctx),
        info: {
          registry,
          control,
          draining,
          pd: config.pd.enabled,
          timeoutMs: config.health.timeoutSecs * 1000,
          clock,
        },
        workers: { registry, manager, clock, grpc: opts.grpc !== undefined },
        meshStatus: () => meshStatus(mesh),
        dashboard: this.dashboard,
      }),
      apiKey: config.apiKey,
      controlPlaneApiKeys: config.controlPlaneApiKeys,
      corsAllowedOrigins: config.corsAllowedOrigins,
      log,
      tenants: createTenants(config),
      resolveTenants: limits !== null,
      requestIdHeaders: config.requestIdHeaders,
      metrics,
      clock,
      tracer: tracing?.tracer,
      slow: this.dashboard.slow,
    });
    // The optional parts, in dependency order: started first to last, stopped last to first.
    this.#features = [
      tracing,
      workerTlsReload(config, workerTls, log, clock),
      loopFeature("health", this.checker),
      loopFeature("loads", this.monitor),
      this.dashboard,
      mesh,
      this.discovery,
      kv,
    ].filter((f) => f !== null);
  }

  /** The main port's handler over fetch's types (`Deno.serve`, tests), with the client's IP. */
  readonly handle = async (
    req: Request,
    completed: Promise<unknown>,
    remote?: string,
  ): Promise<Response> => toResponse(await this.entry(new RequestInbound(req, remote), completed));

  /**
   * Registers the start-up workers and starts the features; settles once every feature serves
   * (the mesh bound, or failed softly: `mesh.failure`).
   */
  start(): Promise<void> {
    addConfiguredWorkers(this.config, this.manager);
    const signal = this.#loops.signal;
    return Promise.all(this.#features.map((f) => f.start?.(signal))).then(() => {});
  }

  /** Every feature reads its files again (SIGHUP); settles once each has. */
  reload(reason: string): Promise<void> {
    return Promise.all(this.#features.map((f) => f.reload?.(reason))).then(() => {});
  }

  /** Whether any feature has files to read again (then SIGHUP is listened to). */
  get reloads(): boolean {
    return this.#features.some((f) => f.reload !== undefined);
  }

  /** The names of the features this gateway runs, in start order. */
  get features(): string[] {
    return this.#features.map((f) => f.name);
  }

  /** Announces LEAVING to the mesh and waits for the acks (no-op without a mesh). */
  async leaveMesh(): Promise<void> {
    await this.mesh?.node.leave();
  }

  /** Resolves once at least `n` workers are ready. */
  whenReady(n: number): Promise<void> {
    const ready = () => this.registry.all().filter((w) => w.status === "ready").length >= n;
    if (ready()) return Promise.resolve();
    return new Promise((resolve) => {
      const off = this.registry.subscribe(() => {
        if (!ready()) return;
        off();
        resolve();
      });
    });
  }

  /** Marks the gateway as draining: readiness answers 503 from now on. */
  drain(): void {
    this.#draining = true;
  }

  /** Whether `drain()` was called. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Stops the background loops and pending removals. */
  async stop(): Promise<void> {
    this.#loops.abort();
    for (const f of this.#features.toReversed()) await f.stop?.();
    await this.manager.stop();
    await this.#proxy.close();
    this.#closeClient();
  }

  /** Refreshes the per-worker gauges and renders the Prometheus text. */
  renderMetrics(): Promise<string> {
    refreshWorkerGauges(this.metrics, this.registry, this.clock.now(), this.ratios);
    for (const f of this.#features) f.gauges?.();
    return this.metrics.render();
  }
}
