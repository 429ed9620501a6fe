/**
 * Launches `smg serve`'s workers, one per data-parallel rank, and waits until each answers
 * `/health`: simulated workers in this process or as `smg sim-worker` children, or the sglang /
 * vLLM server command with the rank's slice of GPUs in `CUDA_VISIBLE_DEVICES`. Every launched
 * worker can be stopped (SIGTERM, then SIGKILL after a grace period); a worker that exits or
 * stays unhealthy past the start-up timeout fails the launch, and the caller stops the others.
 */

import { ConfigError } from "../core/errors.ts";
import { freePort } from "../core/free_port.ts";
import type { Logger } from "../core/log.ts";
import { parseSimWorkerArgs } from "../sim/cli.ts";
import type { ServeOptions } from "./args.ts";

/** The gateway's tokenizer as simulated gRPC workers use it (their output as real token ids). */
export interface SimTokenizer {
  encode(text: string, addSpecial: boolean): number[];
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
}

/** A launched worker. */
export interface LaunchedWorker {
  /** Base URL. */
  url: string;
  /** Stops it; resolves when it is gone. */
  stop(): Promise<void>;
}

/** What a child worker process needs to be started. */
export interface ChildSpec {
  /** Program. */
  cmd: string;
  /** Its arguments. */
  args: string[];
  /** Extra environment (the rank's GPUs). */
  env?: Record<string, string>;
  /** The worker's base URL once it listens. */
  url: string;
}

const KILL_AFTER_MS = 30_000;

/**
 * The program's entry module: `Deno.mainModule`, which a worker thread lacks; there the
 * thread's own script is the same module (the launcher starts it from the entry).
 */
function programUrl(): string {
  return Deno.mainModule ?? (globalThis as { location?: { href: string } }).location!.href;
}

function portFor(o: ServeOptions, rank: number): number {
  return o.workerBasePort === 0 ? freePort(o.workerHost) : o.workerBasePort + rank;
}

/** GPUs per rank from the engine's tensor-parallel flag (default 1). */
function tpSize(engineArgs: string[]): number {
  for (const f of ["--tp-size", "--tp", "--tensor-parallel-size"]) {
    const i = engineArgs.indexOf(f);
    if (i >= 0 && /^\d+$/.test(engineArgs[i + 1] ?? "")) return Number(engineArgs[i + 1]);
  }
  return 1;
}

/** The command for rank `rank` of an external backend or a simulated child. */
export function childSpec(o: ServeOptions, rank: number): ChildSpec {
  const port = portFor(o, rank);
  const url = `http://${o.workerHost}:${port}`;
  const where = ["--host", o.workerHost, "--port", String(port)];
  if (o.backend === "sim") {
    return {
      cmd: Deno.execPath(),
      args: [
        "run",
        "--unstable-no-legacy-abort",
        // It listens on --worker-host and dials nothing.
        `--allow-net=${o.workerHost.includes(":") ? `[${o.workerHost}]` : o.workerHost}`,
        "--allow-env=RUST_LOG,SMG_LOG",
        new URL(programUrl()).pathname,
        "sim-worker",
        ...o.engineArgs,
        ...where,
        "--seed",
        String(rank),
      ],
      url,
    };
  }
  const tp = tpSize(o.engineArgs);
  const gpus = Array.from({ length: tp }, (_, i) => rank * tp + i).join(",");
  const env = { CUDA_VISIBLE_DEVICES: gpus };
  if (o.backend === "sglang") {
    return {
      cmd: "python3",
      args: ["-m", "sglang.launch_server", ...o.engineArgs, ...where],
      env,
      url,
    };
  }
  return { cmd: "vllm", args: ["serve", ...o.engineArgs, ...where], env, url };
}

async function healthy(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
    await r.body?.cancel();
    return r.status === 200;
  } catch {
    return false;
  }
}

/** Starts a child and waits for it to answer /health. */
async function launchChild(spec: ChildSpec, o: ServeOptions, log: Logger): Promise<LaunchedWorker> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(spec.cmd, {
      args: spec.args,
      env: spec.env,
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
  } catch (e) {
    throw new ConfigError(`serve: cannot start '${spec.cmd}': ${(e as Error).message}`);
  }
  let exited: Deno.CommandStatus | null = null;
  const status = child.status.then((s) => (exited = s));
  const stop = async () => {
    if (exited) return;
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise((r) => (timer = setTimeout(r, KILL_AFTER_MS)));
    await Promise.race([status, late]);
    clearTimeout(timer);
    if (!exited) {
      log.warn("worker ignored SIGTERM; killing it", { worker: spec.url });
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      await status;
    }
  };
  const deadline = Date.now() + o.startupTimeoutSecs * 1000;
  while (!(await healthy(spec.url))) {
    if (exited) {
      throw new Error(
        `worker ${spec.url} exited with code ${
          (exited as Deno.CommandStatus).code
        } before it was healthy`,
      );
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`worker ${spec.url} not healthy after ${o.startupTimeoutSecs}s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url: spec.url, stop };
}

/**
 * Launches `o.dpSize` workers. On any failure the ones already started are stopped and the
 * error is rethrown.
 */
export async function launchWorkers(
  o: ServeOptions,
  log: Logger,
  tokenizer?: SimTokenizer,
): Promise<LaunchedWorker[]> {
  const started: LaunchedWorker[] = [];
  try {
    if (o.backend === "sim" && !o.simProcesses && o.connectionMode === "grpc") {
      const { startSimWorker } = await import("../sim/worker.ts");
      const { SimGrpcServer } = await import("../sim/grpc_server.ts");
      for (let rank = 0; rank < o.dpSize; rank++) {
        const parsed = parseSimWorkerArgs([...o.engineArgs, "--port", "0", "--seed", String(rank)]);
        if (parsed === "help") throw new ConfigError("serve: --help is not an engine flag");
        const w = startSimWorker({ ...parsed, host: o.workerHost });
        const grpc = new SimGrpcServer(w.engine, {
          model: parsed.server.model,
          maxNewTokens: parsed.server.maxNewTokens,
          encodeOutput: tokenizer ? (t) => tokenizer.encode(t, false) : undefined,
          vocabSize: tokenizer?.vocabSize,
          eosTokenIds: tokenizer ? [...tokenizer.eosTokenIds] : undefined,
        });
        const port = await grpc.serve(
          o.workerHost,
          o.workerBasePort === 0 ? 0 : o.workerBasePort + rank,
        );
        started.push({
          url: `grpc://${o.workerHost}:${port}`,
          stop: async () => {
            await grpc.close();
            await w.close();
          },
        });
      }
      return started;
    }
    if (o.backend === "sim" && !o.simProcesses) {
      // The simulator is imported by the backend that runs it, not by every start.
      const { startSimWorker } = await import("../sim/worker.ts");
      for (let rank = 0; rank < o.dpSize; rank++) {
        const port = o.workerBasePort === 0 ? 0 : o.workerBasePort + rank;
        const parsed = parseSimWorkerArgs([
          ...o.engineArgs,
          "--port",
          String(port),
          "--seed",
          String(rank),
        ]);
        if (parsed === "help") throw new ConfigError("serve: --help is not an engine flag");
        const w = startSimWorker({ ...parsed, host: o.workerHost });
        started.push({ url: w.url, stop: () => w.close() });
      }
      return started;
    }
    if (o.backend === "sim") {
      // Validate the engine flags here, so a typo fails once and clearly, not once per child.
      parseSimWorkerArgs(o.engineArgs);
    }
    const launched = await Promise.allSettled(
      Array.from({ length: o.dpSize }, (_, rank) => launchChild(childSpec(o, rank), o, log)),
    );
    for (const r of launched) if (r.status === "fulfilled") started.push(r.value);
    const failed = launched.find((r) => r.status === "rejected") as
      | PromiseRejectedResult
      | undefined;
    if (failed) throw failed.reason;
    return started;
  } catch (e) {
    await Promise.all(started.map((w) => w.stop()));
    throw e;
  }
}
