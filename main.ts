/**
 * The `smg` entry point: parse the command line, build the config, hand it to the composition
 * root, serve. Bad configuration prints one line and exits 2.
 */

import { HelpShown, parseGatewayArgs } from "./lib/config/cli.ts";
import { validateConfig } from "./lib/config/validate.ts";
import { ConfigError } from "./lib/core/errors.ts";
import { createLogger } from "./lib/core/log.ts";
import { Gateway } from "./lib/server/app.ts";
import { serveGateway } from "./lib/server/serve.ts";
import denoJson from "./deno.json" with { type: "json" };

/** Runs the command in `args`; resolves with the process exit code. */
export async function main(args: string[]): Promise<number> {
  let gateway: Gateway;
  let log;
  try {
    const config = parseGatewayArgs(args, denoJson.version);
    validateConfig(config);
    log = createLogger({
      level: config.logLevel,
      json: config.logJson,
      filter: Deno.env.get("RUST_LOG") ?? Deno.env.get("SMG_LOG"),
    });
    gateway = new Gateway({ config, log });
  } catch (e) {
    if (e instanceof HelpShown) return 0;
    if (e instanceof ConfigError) {
      console.error(`smg: ${e.message}`);
      return 2;
    }
    throw e;
  }
  const serving = serveGateway(gateway, log);
  await serving.finished;
  return 0;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
