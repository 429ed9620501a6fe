/**
 * The `smg` entry point: picks the command (`sim-worker`, `serve`, or the gateway itself, with
 * or without `launch`), runs it, and exits with its code. Bad configuration prints one line and
 * exits 2. Started with a global `--allow-net`, the command runs in a worker thread of this
 * module whose net grant is only what its flags need (`lib/commands/launcher.ts`). A thread
 * named for tokenizing (`lib/tokenizer/pool.ts`) runs this module as its entry too.
 */

import { gatewayCommand } from "./lib/commands/gateway.ts";
import { commandThread, describeGrant, inWorkerThread, launch } from "./lib/commands/launcher.ts";
import { serveCommand } from "./lib/commands/serve.ts";
import { ConfigError } from "./lib/core/errors.ts";
import type { NetGrant } from "./lib/server/net_grant.ts";
import { setTokenizerThreadEntry } from "./lib/tokenizer/pool.ts";
import { isTokenizerThread, tokenizerThread } from "./lib/tokenizer/thread.ts";

/**
 * Runs the command in `args`; resolves with the process exit code. `exit` ends the process at
 * once (a simulated worker's crash); default `Deno.exit`. `grant` is the launcher's net grant,
 * for the start-up log (null: the process's own).
 */
export async function main(
  args: string[],
  exit: (code: number) => void = Deno.exit,
  grant: NetGrant | null = null,
): Promise<number> {
  try {
    if (args[0] === "sim-worker") {
      // Imported here, so the simulator is loaded by the commands that run it and no other.
      const { simWorkerCommand } = await import("./lib/commands/sim_worker.ts");
      return await simWorkerCommand(args.slice(1), exit);
    }
    if (args[0] === "serve") return await serveCommand(args.slice(1), describeGrant(grant));
    return await gatewayCommand(args, describeGrant(grant));
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`smg: ${e.message}`);
      return 2;
    }
    throw e;
  }
}

if (import.meta.main) {
  // Tokenizer threads run this module too (so a bundle or a binary starts them from itself).
  setTokenizerThreadEntry(import.meta.url);
  if (isTokenizerThread()) tokenizerThread();
  else if (inWorkerThread()) commandThread(main);
  else Deno.exit(await launch(Deno.args, import.meta.url, main));
}
