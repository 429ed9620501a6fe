/**
 * `smg serve`: launches workers (simulated or sglang/vLLM), starts the gateway in front of them
 * with the `--router-` flags, waits until every worker is routable, prints where to send
 * requests and where the status page is, and on SIGTERM/SIGINT drains the gateway and stops
 * every worker (also when a worker fails to start). One worker switches the policy to `passthrough` and turns retries and the
 * circuit breaker off, as SMG's serve does.
 */

import { bundledQwen3, type GrpcSupport, grpcSupport } from "./grpc_support.ts";
import { HelpShown, loadGatewayArgs } from "../config/cli.ts";
import { validateConfig } from "../config/validate.ts";
import { ConfigError } from "../core/errors.ts";
import { createLogger } from "../core/log.ts";
import { parseServeArgs, SERVE_HELP } from "../launch/args.ts";
import { launchWorkers } from "../launch/workers.ts";
import { Gateway } from "../server/app.ts";
import { listenGateway } from "../server/listen.ts";
import { loadTls } from "../tls/pem.ts";
import { VERSION } from "./gateway.ts";
import { processEnv, tracingSettings } from "../tracing/settings.ts";

/**
 * Runs `smg serve`; resolves with the exit code. Throws ConfigError for bad flags. `netGrant`
 * describes the runtime net grant for the start-up log.
 */
export async function serveCommand(args: string[], netGrant?: string): Promise<number> {
  const o = parseServeArgs(args);
  if (o === "help") {
    console.log(SERVE_HELP);
    return 0;
  }
  let config;
  let sources;
  try {
    ({ config, sources } = await loadGatewayArgs(o.routerArgs, VERSION));
  } catch (e) {
    if (e instanceof HelpShown) return 0;
    if (e instanceof ConfigError) {
      // A flag's message starts with it; a config file's with its path and line.
      const what = e.message.startsWith("--") ? "router flag " : "router config ";
      throw new ConfigError(`serve: ${what}${e.message}`);
    }
    throw e;
  }
  // As `--router-host` & co. on the command line (args.ts), so in a config file.
  for (const flag of ["--host", "--port", "--worker-urls"]) {
    const where = sources.get(flag);
    if (where !== undefined) {
      throw new ConfigError(
        `serve: router config ${where}: decided by serve (its --host/--port; the workers it launches)`,
      );
    }
  }
  config.host = o.host;
  config.port = o.port;
  const log = createLogger({
    level: config.logLevel,
    json: config.logJson,
    filter: Deno.env.get("RUST_LOG") ?? Deno.env.get("SMG_LOG"),
  });
  if (o.dpSize <= 1) {
    config.policy = "passthrough";
    config.retry.disabled = true;
    config.circuitBreaker.disabled = true;
  }
  let grpc: GrpcSupport | undefined;
  if (o.connectionMode === "grpc") {
    config.modelPath ??= config.tokenizerPath ?? await bundledQwen3();
    grpc = await grpcSupport(config.tokenizerPath ?? config.modelPath);
  }
  validateConfig(config, sources);
  const tls = await loadTls(config);
  const settings = tracingSettings(config.tracing, processEnv, VERSION);

  let workers;
  try {
    workers = await launchWorkers(o, log, grpc?.tokenizer);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    console.error(`smg serve: ${(e as Error).message}`);
    return 1;
  }
  const stopWorkers = () => Promise.all(workers.map((w) => w.stop()));
  let gateway: Gateway;
  try {
    config = validateConfig({ ...config, workerUrls: workers.map((w) => w.url) }, sources);
    gateway = new Gateway({ config, log, grpc, tls, tracing: settings && { settings } });
  } catch (e) {
    await stopWorkers();
    throw e;
  }
  // Heard before the gateway says it listens: a supervisor may signal as soon as it reads that.
  const { promise: signalled, resolve } = Promise.withResolvers<void>();
  Deno.addSignalListener("SIGTERM", resolve);
  Deno.addSignalListener("SIGINT", resolve);
  let serving;
  try {
    serving = await listenGateway(gateway, log, { signals: false, netGrant });
  } catch (e) {
    Deno.removeSignalListener("SIGTERM", resolve);
    Deno.removeSignalListener("SIGINT", resolve);
    await stopWorkers();
    throw e;
  }
  const ready = await Promise.race([
    gateway.whenReady(workers.length).then(() => true),
    signalled.then(() => false),
  ]);
  if (ready) {
    console.log(
      banner(
        serving.addr,
        serving.metricsAddr,
        gateway.policy.name,
        workers.length,
        o.backend,
        tls.server ? "https" : "http",
      ),
    );
  }
  await signalled;
  Deno.removeSignalListener("SIGTERM", resolve);
  Deno.removeSignalListener("SIGINT", resolve);
  await serving.shutdown();
  await stopWorkers();
  return 0;
}

function banner(
  addr: Deno.NetAddr,
  metrics: Deno.NetAddr,
  policy: string,
  n: number,
  backend: string,
  scheme: "http" | "https",
): string {
  const host = addr.hostname === "0.0.0.0" ? "127.0.0.1" : addr.hostname;
  const url = `${scheme}://${host}:${addr.port}`;
  const mhost = metrics.hostname === "0.0.0.0" ? "127.0.0.1" : metrics.hostname;
  const body = JSON.stringify({
    model: backend === "sim" ? "sim-model" : "YOUR-MODEL",
    messages: [{ role: "user", content: "Hello! Tell me about prefix caches." }],
  });
  return [
    `smg is ready on ${url} with ${n} ${backend === "sim" ? "simulated " : ""}worker${
      n === 1 ? "" : "s"
    } (policy ${policy}).`,
    `Send a request (the x-smg-routed-worker-id header names the worker; usage shows cached tokens):`,
    `  curl -si ${url}/v1/chat/completions -H 'content-type: application/json' -d '${body}'`,
    `Watch the workers and the routing live: http://${mhost}:${metrics.port}/dashboard`,
    `Workers: ${url}/workers   Metrics: http://${mhost}:${metrics.port}/metrics   Stop: Ctrl-C`,
  ].join("\n");
}
