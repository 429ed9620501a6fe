/**
 * `smg sim-worker FLAGS`: one simulated sglang-compatible worker. Flags name the engine's knobs
 * (capacity, batch cap, speeds, time scale) and the fault knobs; bad values fail at start with a
 * one-line ConfigError (exit 2), like the gateway's flags.
 */

import { Command, CommanderError, Option } from "commander";
import { badValue, ConfigError } from "../core/errors.ts";
import { MAX_CHARS_PER_TOKEN } from "./piece_cutter.ts";
import type { EngineConfig } from "./types.ts";
import type { SimWorkerOptions } from "./worker.ts";

/** The engine defaults (upstream's realistic mock, with a smaller KV cache so reuse matters). */
export const DEFAULT_ENGINE: EngineConfig = {
  kvTokens: 65536,
  blockSize: 16,
  maxRunning: 32,
  prefillChunk: 2048,
  prefillTps: 8000,
  decodeBaseMs: 6,
  decodePerReqMs: 0.35,
  timeScale: 1,
};

type Num = { flag: string; help: string; min: number; int: boolean; def: number };

/** Numeric flags: name, help, lower bound, integer or not, default. */
const NUMBERS: Num[] = [
  { flag: "port", help: "port to listen on (0 picks one)", min: 0, int: true, def: 8000 },
  {
    flag: "kv-tokens",
    help: "KV cache capacity in tokens",
    min: 1,
    int: true,
    def: DEFAULT_ENGINE.kvTokens,
  },
  {
    flag: "block-size",
    help: "tokens per KV block",
    min: 1,
    int: true,
    def: DEFAULT_ENGINE.blockSize,
  },
  {
    flag: "max-running",
    help: "largest running batch",
    min: 1,
    int: true,
    def: DEFAULT_ENGINE.maxRunning,
  },
  {
    flag: "prefill-chunk",
    help: "prompt tokens prefilled per step",
    min: 1,
    int: true,
    def: DEFAULT_ENGINE.prefillChunk,
  },
  {
    flag: "prefill-tps",
    help: "prefill speed, tokens per second",
    min: 1,
    int: false,
    def: DEFAULT_ENGINE.prefillTps,
  },
  {
    flag: "decode-base-ms",
    help: "decode step time with one request",
    min: 0,
    int: false,
    def: DEFAULT_ENGINE.decodeBaseMs,
  },
  {
    flag: "decode-per-req-ms",
    help: "extra decode step time per running request",
    min: 0,
    int: false,
    def: DEFAULT_ENGINE.decodePerReqMs,
  },
  {
    flag: "time-scale",
    help: "wall ms per simulated ms (0.1 runs 10x faster, 0 instant)",
    min: 0,
    int: false,
    def: 1,
  },
  {
    flag: "max-new-tokens",
    help: "output length when a request sets none",
    min: 0,
    int: true,
    def: 64,
  },
  { flag: "seed", help: "seed for generated text and fault knobs", min: 0, int: true, def: 0 },
  { flag: "error-rate", help: "share of requests answered with a 500", min: 0, int: false, def: 0 },
  {
    flag: "spike-rate",
    help: "share of requests delayed by a latency spike",
    min: 0,
    int: false,
    def: 0,
  },
  { flag: "spike-ms", help: "length of a latency spike, simulated ms", min: 0, int: false, def: 0 },
  {
    flag: "die-after",
    help: "exit after this many inference requests (0: never)",
    min: 0,
    int: true,
    def: 0,
  },
  {
    flag: "bootstrap-port",
    help: "PD: the prefill role's bootstrap port (0 picks one)",
    min: 0,
    int: true,
    def: 8998,
  },
  {
    flag: "bootstrap-timeout-ms",
    help: "PD: how long decode waits for its prefill's room",
    min: 1,
    int: true,
    def: 30000,
  },
];

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** A port flag's value (0..65535), or null when absent; ConfigError otherwise. */
function portFlag(flag: string, raw: unknown): number | null {
  if (raw === undefined) return null;
  const port = Number(raw);
  if (String(raw).trim() === "" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw badValue(flag, raw, "expected a port 0..65535");
  }
  return port;
}

/** `--chars-per-token`'s value (1..1024, fractions allowed), or null when absent. */
function charsPerTokenFlag(raw: unknown): number | null {
  if (raw === undefined) return null;
  const n = Number(raw);
  if (String(raw).trim() === "" || !(n >= 1 && n <= MAX_CHARS_PER_TOKEN)) {
    throw badValue("--chars-per-token", raw, `expected a number in 1..${MAX_CHARS_PER_TOKEN}`);
  }
  return n;
}

/** Parses `smg sim-worker` flags; throws ConfigError on bad input, or `"help"` after --help. */
export function parseSimWorkerArgs(args: string[]): SimWorkerOptions | "help" {
  const program = new Command("smg sim-worker")
    .description(
      "a simulated sglang-compatible inference worker (prefix KV cache, continuous batching)",
    )
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({
      writeErr: () => {},
      outputError: () => {},
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    })
    .option("--host <addr>", "address to listen on", "127.0.0.1")
    .option("--model <id>", "served model id", "sim-model")
    .option("--hang", "never answer inference requests")
    .option(
      "--grpc-port <n>",
      "also serve sglang's scheduler gRPC service on this port (0 picks one)",
    )
    .option(
      "--kv-events-port <n>",
      "publish the KV cache's events on a ZeroMQ PUB on this port, as vLLM's and SGLang's --kv-events-config do (0 picks one)",
    )
    .option(
      "--kv-events-replay-port <n>",
      "with --kv-events-port: serve their replay on a ZeroMQ ROUTER on this port (0 picks one)",
    )
    .option(
      "--model-path <dir>",
      "the gateway's tokenizer (a directory or tokenizer.json): HTTP prompts are tokenized as the gateway does, and with --grpc-port the generated words are its ids",
    )
    .option(
      "--chars-per-token <n>",
      "tokenize prompts and generate text at a mean of N characters per token (content-defined pieces; default: whitespace runs and word chunks of at most 4 characters); not with --model-path",
    )
    .addOption(
      new Option("--role <role>", "PD role (sglang: --disaggregation-mode)").choices([
        "regular",
        "prefill",
        "decode",
      ])
        .default("regular"),
    )
    .addOption(
      new Option("--disaggregation-mode <role>").choices(["prefill", "decode"]).hideHelp(),
    );
  for (const n of NUMBERS) {
    program.addOption(
      new Option(`--${n.flag} <n>`, `${n.help} (default: ${n.def})`).argParser((v) => {
        const x = Number(v);
        if (
          v.trim() === "" || !Number.isFinite(x) || (n.int && !Number.isInteger(x)) || x < n.min
        ) {
          throw badValue(
            `--${n.flag}`,
            v,
            `expected ${n.int ? "an integer" : "a number"} >= ${n.min}`,
          );
        }
        return x;
      }),
    );
  }
  try {
    program.parse(args, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) return "help";
      throw new ConfigError(e.message.replace(/^error: /, "sim-worker: "));
    }
    throw e;
  }
  const o = program.opts() as Record<string, unknown>;
  const num = (flag: string) =>
    (o[camel(flag)] as number | undefined) ?? NUMBERS.find((n) => n.flag === flag)!.def;
  for (const f of ["error-rate", "spike-rate"]) {
    if (num(f) > 1) throw badValue(`--${f}`, num(f), "allowed: 0..1");
  }
  const grpcPort = portFlag("--grpc-port", o.grpcPort);
  const kvEventsPort = portFlag("--kv-events-port", o.kvEventsPort);
  const kvEventsReplayPort = portFlag("--kv-events-replay-port", o.kvEventsReplayPort);
  if (kvEventsReplayPort !== null && kvEventsPort === null) {
    throw badValue("--kv-events-replay-port", kvEventsReplayPort, "only with --kv-events-port");
  }
  const modelPath = (o.modelPath as string | undefined) ?? null;
  const charsPerToken = charsPerTokenFlag(o.charsPerToken);
  if (charsPerToken !== null && modelPath !== null) {
    throw badValue(
      "--chars-per-token",
      o.charsPerToken,
      "not with --model-path (the gateway's tokenizer decides the tokens)",
    );
  }
  return {
    host: o.host as string,
    port: num("port"),
    grpcPort,
    kvEventsPort,
    kvEventsReplayPort,
    modelPath,
    charsPerToken,
    bootstrapPort: num("bootstrap-port"),
    seed: num("seed"),
    engine: {
      kvTokens: num("kv-tokens"),
      blockSize: num("block-size"),
      maxRunning: num("max-running"),
      prefillChunk: num("prefill-chunk"),
      prefillTps: num("prefill-tps"),
      decodeBaseMs: num("decode-base-ms"),
      decodePerReqMs: num("decode-per-req-ms"),
      timeScale: num("time-scale"),
    },
    server: {
      model: o.model as string,
      maxNewTokens: num("max-new-tokens"),
      errorRate: num("error-rate"),
      spikeRate: num("spike-rate"),
      spikeMs: num("spike-ms"),
      dieAfter: num("die-after"),
      hang: o.hang === true,
      role: ((o.disaggregationMode as string | undefined) ?? o.role) as
        | "regular"
        | "prefill"
        | "decode",
      bootstrapTimeoutMs: num("bootstrap-timeout-ms"),
    },
  };
}

/** The sim-worker flags as `--flag` strings (for `smg serve`, which passes them through). */
export const SIM_FLAGS: ReadonlySet<string> = new Set([
  "--model",
  "--hang",
  "--role",
  "--disaggregation-mode",
  "--chars-per-token",
  ...NUMBERS.filter((n) => n.flag !== "port").map((n) => `--${n.flag}`),
]);
