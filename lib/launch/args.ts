/**
 * `smg serve`'s command line, split three ways as SMG's serve does: its own flags, gateway
 * flags spelled `--router-<flag>`, and everything else for the engine (the simulator's knobs,
 * or sglang/vLLM arguments passed through verbatim).
 */

import { badValue, ConfigError } from "../core/errors.ts";

/** Which engine `serve` launches. */
export type Backend = "sim" | "sglang" | "vllm";

/** `smg serve`'s own settings. */
export interface ServeOptions {
  /** Engine to launch (`--backend`, sglang as upstream; `sim` needs no GPU). */
  backend: Backend;
  /** The gateway's address (`--host`, 127.0.0.1). */
  host: string;
  /** The gateway's port (`--port`, 8080). */
  port: number;
  /** Workers to launch, one per data-parallel rank (`--dp-size`, 1). */
  dpSize: number;
  /** Address workers listen on (`--worker-host`, 127.0.0.1). */
  workerHost: string;
  /** First worker port; 0 lets each worker pick one (`--worker-base-port`, 31000). */
  workerBasePort: number;
  /** Seconds a worker may take to answer /health (`--worker-startup-timeout`, 300). */
  startupTimeoutSecs: number;
  /** Run simulated workers as child processes instead of in this process (`--sim-processes`). */
  simProcesses: boolean;
  /** How the gateway talks to the workers (`--connection-mode`, http; grpc: simulated only). */
  connectionMode: "http" | "grpc";
  /** Gateway flags, `--router-` prefix removed. */
  routerArgs: string[];
  /** Engine flags, verbatim. */
  engineArgs: string[];
}

const BACKENDS: readonly Backend[] = ["sim", "sglang", "vllm"];

/** Groups `args` into flags with their values (`--a 1 2 --b` → [["--a","1","2"],["--b"]]). */
function groups(args: string[]): string[][] {
  const out: string[][] = [];
  for (const a of args) {
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      out.push(eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [a]);
    } else if (out.length > 0) {
      out[out.length - 1].push(a);
    } else {
      throw new ConfigError(`serve: unexpected argument '${a}'; flags start with --`);
    }
  }
  return out;
}

function one(g: string[]): string {
  if (g.length !== 2) throw badValue(g[0], g.slice(1).join(" "), "expected exactly one value");
  return g[1];
}

function int(g: string[], min: number): number {
  const v = one(g);
  if (!/^\d+$/.test(v) || Number(v) < min) throw badValue(g[0], v, `expected an integer >= ${min}`);
  return Number(v);
}

/** Parses `smg serve` arguments (after the word `serve`). */
export function parseServeArgs(
  args: string[],
  defaultBackend: Backend = "sglang",
): ServeOptions | "help" {
  const o: ServeOptions = {
    backend: defaultBackend,
    host: "127.0.0.1",
    port: 8080,
    dpSize: 1,
    workerHost: "127.0.0.1",
    workerBasePort: 31000,
    startupTimeoutSecs: 300,
    simProcesses: false,
    connectionMode: "http",
    routerArgs: [],
    engineArgs: [],
  };
  for (const g of groups(args)) {
    const flag = g[0];
    if (flag.startsWith("--router-")) {
      o.routerArgs.push(`--${flag.slice("--router-".length)}`, ...g.slice(1));
      continue;
    }
    switch (flag) {
      case "--help":
        return "help";
      case "--backend":
      case "--runtime": {
        const b = one(g) as Backend;
        if (!BACKENDS.includes(b)) throw badValue(flag, b, `allowed: ${BACKENDS.join(", ")}`);
        o.backend = b;
        break;
      }
      case "--host":
        o.host = one(g);
        break;
      case "--port":
        o.port = int(g, 0);
        break;
      case "--dp-size":
      case "--data-parallel-size":
        o.dpSize = int(g, 1);
        break;
      case "--worker-host":
        o.workerHost = one(g);
        break;
      case "--worker-base-port":
        o.workerBasePort = int(g, 0);
        break;
      case "--worker-startup-timeout":
        o.startupTimeoutSecs = int(g, 1);
        break;
      case "--sim-processes":
        o.simProcesses = true;
        break;
      case "--connection-mode": {
        const mode = one(g);
        if (mode !== "http" && mode !== "grpc") throw badValue(flag, mode, "allowed: http, grpc");
        o.connectionMode = mode;
        break;
      }
      default:
        o.engineArgs.push(...g);
    }
  }
  if (o.connectionMode === "grpc" && (o.backend !== "sim" || o.simProcesses)) {
    throw new ConfigError(
      "serve: --connection-mode grpc is served by in-process simulated workers only (--backend sim, no --sim-processes)",
    );
  }
  for (const a of o.routerArgs) {
    if (a === "--worker-urls" || a === "--host" || a === "--port") {
      throw new ConfigError(
        `serve: --router-${
          a.slice(2)
        } is decided by serve (its --host/--port; the workers it launches)`,
      );
    }
  }
  return o;
}

/** `smg serve --help`. */
export const SERVE_HELP =
  `Usage: smg serve [serve flags] [--router-<gateway flag> ...] [engine flags]

Launches workers and the gateway in front of them; stops the workers on exit.

Serve flags:
  --backend sim|sglang|vllm   engine to launch (default: sglang; sim needs no GPU)
  --dp-size N                 workers to launch, one per data-parallel rank (default: 1)
  --host ADDR / --port N      the gateway's address (default: 127.0.0.1:8080)
  --worker-host ADDR          address workers listen on (default: 127.0.0.1)
  --worker-base-port N        first worker port, 0 picks free ones (default: 31000)
  --worker-startup-timeout S  seconds a worker may take to become healthy (default: 300)
  --sim-processes             run simulated workers as child processes (default: in-process)
  --connection-mode http|grpc how the gateway talks to the workers (default: http); grpc: the
                              simulated workers serve sglang's scheduler gRPC service and the
                              gateway tokenizes (--router-model-path, default: the bundled Qwen3
                              tokenizer)

Gateway flags take a --router- prefix, e.g. --router-policy round_robin,
--router-prometheus-port 29001, --router-config FILE (gateway settings from a YAML or JSON
file). With one worker the policy is passthrough and retries and the circuit breaker are off,
as SMG does.

Engine flags: with --backend sim, the knobs of 'smg sim-worker --help' (--time-scale,
--kv-tokens, --max-running, --prefill-tps, ...); with sglang or vllm, anything else is passed
to the engine command verbatim.
`;
