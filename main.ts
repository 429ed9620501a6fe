/**
 * The `smg` entry point: picks the command (`sim-worker`, `serve`, or the gateway itself, with
 * or without `launch`), runs it, and exits with its code. Bad configuration prints one line and
 * exits 2.
 */

import { gatewayCommand } from "./lib/commands/gateway.ts";
import { serveCommand } from "./lib/commands/serve.ts";
import { simWorkerCommand } from "./lib/commands/sim_worker.ts";
import { ConfigError } from "./lib/core/errors.ts";

/** Runs the command in `args`; resolves with the process exit code. */
export async function main(args: string[]): Promise<number> {
  try {
    if (args[0] === "sim-worker") return await simWorkerCommand(args.slice(1));
    if (args[0] === "serve") return await serveCommand(args.slice(1));
    return await gatewayCommand(args);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`smg: ${e.message}`);
      return 2;
    }
    throw e;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
