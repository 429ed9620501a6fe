/**
 * `smg [launch] FLAGS`: parses and validates the gateway flags (and the `--config` file), builds
 * the gateway and serves it until SIGTERM/SIGINT has drained it. Throws ConfigError on bad flags
 * (and on `OTEL_*` variables tracing cannot use).
 */

import { HelpShown, loadGatewayArgs } from "../config/cli.ts";
import { validateConfig } from "../config/validate.ts";
import { createLogger } from "../core/log.ts";
import { Gateway } from "../server/app.ts";
import { listenGateway } from "../server/listen.ts";
import { loadTls } from "../tls/pem.ts";
import { grpcSupport } from "./grpc_support.ts";
import { processEnv, tracingSettings } from "../tracing/settings.ts";
import denoJson from "../../deno.json" with { type: "json" };

/** The version printed by --version. */
export const VERSION: string = denoJson.version;

/**
 * Runs the gateway; resolves with the exit code once it has shut down. `netGrant` describes
 * the runtime net grant for the start-up log.
 */
export async function gatewayCommand(args: string[], netGrant?: string): Promise<number> {
  let parsed;
  try {
    parsed = await loadGatewayArgs(args, VERSION);
  } catch (e) {
    if (e instanceof HelpShown) return 0;
    throw e;
  }
  const config = validateConfig(parsed.config, parsed.sources);
  const log = createLogger({
    level: config.logLevel,
    json: config.logJson,
    filter: Deno.env.get("RUST_LOG") ?? Deno.env.get("SMG_LOG"),
  });
  const tls = await loadTls(config);
  const settings = tracingSettings(config.tracing, processEnv, VERSION);
  const path = config.tokenizerPath ?? config.modelPath;
  const grpc = path === null ? undefined : await grpcSupport(path);
  const gateway = new Gateway({ config, log, grpc, tls, tracing: settings && { settings } });
  await (await listenGateway(gateway, log, { netGrant })).finished;
  return 0;
}
