/**
 * Starts a real gateway on loopback port 0 (main and metrics), with test-friendly settings and a
 * silent logger unless `SMG_TEST_LOG` is set, and waits on registry events instead of sleeping.
 */

import { defaultConfig, type GatewayConfig } from "../lib/config/config.ts";
import { validateConfig } from "../lib/config/validate.ts";
import { createLogger, silentLogger } from "../lib/core/log.ts";
import { Gateway, type GatewayOptions } from "../lib/server/app.ts";
import { listenGateway, type Listening } from "../lib/server/listen.ts";
import { loadTls } from "../lib/tls/pem.ts";

/** Config overrides, deep-merged one level. */
export type Overrides =
  & Partial<
    Omit<GatewayConfig, "health" | "circuitBreaker" | "retry" | "loadMonitor" | "admission">
  >
  & {
    health?: Partial<GatewayConfig["health"]>;
    circuitBreaker?: Partial<GatewayConfig["circuitBreaker"]>;
    retry?: Partial<GatewayConfig["retry"]>;
    loadMonitor?: Partial<GatewayConfig["loadMonitor"]>;
    admission?: Partial<GatewayConfig["admission"]>;
  };

/** A test config: loopback, port 0, round_robin, retries without backoff, seeded. */
export function testConfig(o: Overrides = {}): GatewayConfig {
  const d = defaultConfig();
  const c: GatewayConfig = {
    ...d,
    host: "127.0.0.1",
    port: 0,
    prometheusHost: "127.0.0.1",
    prometheusPort: 0,
    policy: "round_robin",
    randomSeed: 42,
    shutdownGracePeriodSecs: 0,
    ...o,
    health: { ...d.health, ...o.health },
    circuitBreaker: { ...d.circuitBreaker, ...o.circuitBreaker },
    // Retries at once: a backoff on a test's FakeClock would wait for the test to advance it.
    retry: { ...d.retry, initialBackoffMs: 0, maxBackoffMs: 0, ...o.retry },
    loadMonitor: { ...d.loadMonitor, ...o.loadMonitor },
    admission: { ...d.admission, ...o.admission },
  };
  return c;
}

/** A running test gateway. */
export interface TestGateway {
  /** The gateway object. */
  gw: Gateway;
  /** Base URL of the main port. */
  url: string;
  /** URL of `/metrics`. */
  metricsUrl: string;
  /** Resolves once `n` workers are ready. */
  ready(n?: number): Promise<void>;
  /** Shuts down. */
  close(): Promise<void>;
  /** The serving handle. */
  serving: Listening;
}

/** Starts a gateway in front of `workerUrls`. */
export async function startGateway(
  workerUrls: string[],
  o: Overrides = {},
  extra: Partial<GatewayOptions> = {},
): Promise<TestGateway> {
  const config = validateConfig(testConfig({ workerUrls, ...o }));
  const log = Deno.env.get("SMG_TEST_LOG") ? createLogger({ level: "debug" }) : silentLogger;
  const tls = extra.tls ?? await loadTls(config);
  const gw = new Gateway({ config, log, tls, ...extra });
  const serving = await listenGateway(gw, log, { signals: false });
  const t: TestGateway = {
    gw,
    serving,
    url: `${tls.server ? "https" : "http"}://127.0.0.1:${serving.addr.port}`,
    metricsUrl: `http://127.0.0.1:${serving.metricsAddr.port}/metrics`,
    ready: (n = workerUrls.length) => gw.whenReady(n),
    close: () => serving.shutdown(),
  };
  await t.ready();
  return t;
}
