/**
 * `smg sim-worker`: runs one simulated worker until SIGTERM/SIGINT (exit 0), or until
 * `--die-after` is reached (exit 1, connections cut, like a crashed engine).
 */

import { createLogger } from "../core/log.ts";
import { promptOf } from "../tokenizer/prompt.ts";
import { parseSimWorkerArgs } from "../sim/cli.ts";
import { startSimWorker } from "../sim/worker.ts";

/**
 * Runs the command; resolves with the exit code. Throws ConfigError for bad flags. `die` ends
 * the process at once when `--die-after` is reached (default `Deno.exit`; in a worker thread,
 * the launcher's, which ends the whole process rather than the thread).
 */
export async function simWorkerCommand(
  args: string[],
  die: (code: number) => void = Deno.exit,
): Promise<number> {
  const opts = parseSimWorkerArgs(args);
  if (opts === "help") return 0;
  const log = createLogger({ filter: Deno.env.get("RUST_LOG") ?? Deno.env.get("SMG_LOG") });
  const { promise: exit, resolve } = Promise.withResolvers<number>();
  opts.server.onDie = () => {
    log.warn("sim-worker dying as told (--die-after)");
    die(1);
  };
  // The gateway's tokenizer: HTTP prompts read as the gateway reads them, so the engine's
  // blocks are the token ids the gateway routes on; gRPC output as its ids.
  const tok = opts.modelPath
    ? await (await import("../tokenizer/tokenizer.ts")).loadTokenizer(opts.modelPath)
    : null;
  if (tok) opts.server.promptTokens = (api, body) => promptOf(api, body, tok).ids;
  const worker = startSimWorker(opts);
  log.info("sim-worker listening", { addr: worker.url, model: opts.server.model });
  if (worker.kvEvents) {
    // The worker labels a gateway subscribes with: kv_events, kv_events_replay.
    log.info("sim-worker publishing KV events", {
      kv_events: worker.kvEvents.endpoint,
      kv_events_replay: worker.kvEvents.replayEndpoint ?? undefined,
    });
  }
  let grpc: { close(): Promise<void> } | null = null;
  if (opts.grpcPort !== null && opts.grpcPort !== undefined) {
    const { SimGrpcServer } = await import("../sim/grpc_server.ts");
    const server = new SimGrpcServer(worker.engine, {
      model: opts.server.model,
      maxNewTokens: opts.server.maxNewTokens,
      encodeOutput: tok ? (t) => tok.encode(t, false) : undefined,
      vocabSize: tok?.vocabSize,
      eosTokenIds: tok ? [...tok.eosTokenIds] : undefined,
      role: opts.server.role,
      rooms: worker.rooms,
      bootstrapTimeoutMs: opts.server.bootstrapTimeoutMs,
    });
    const port = await server.serve(opts.host, opts.grpcPort);
    grpc = server;
    log.info("sim-worker serving gRPC", { addr: `grpc://${opts.host}:${port}` });
  }
  const stop = () => resolve(0);
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  const code = await exit;
  Deno.removeSignalListener("SIGTERM", stop);
  Deno.removeSignalListener("SIGINT", stop);
  await grpc?.close();
  await worker.close();
  return code;
}
