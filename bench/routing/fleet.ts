/**
 * The simulated fleet: N `smg sim-worker` child processes pinned to CPU 1, started fresh for
 * every measurement (a new process is the surest reset of KV caches and counters), and their
 * own Prometheus counters read back from `/metrics`. Counter names are sglang's.
 */

import {
  type Child,
  HOST,
  spawn,
  stop,
  waitFor,
  waitForListener,
} from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";

/** The CPU the workers are pinned to. */
export const FLEET_CPU = 1;

/** A running fleet. */
export interface Fleet {
  /** Base URLs (HTTP: health and counters), in start order. */
  urls: string[];
  /** What a gateway routes to: the same, or the workers' `grpc://` URLs in gRPC mode. */
  targets: string[];
  /**
   * Each worker's labels for our gateway: in KV-event mode its ZeroMQ endpoints (`kv_events`,
   * `kv_events_replay`), else none.
   */
  labels: Record<string, string>[];
  /** The worker processes. */
  children: Child[];
}

/** One worker's cumulative counters (sums over label sets). */
export interface WorkerCounters {
  /** `sglang:prompt_tokens_total`. */
  promptTokens: number;
  /** `sglang:cached_tokens_total`. */
  cachedTokens: number;
  /** `sglang:generation_tokens_total`. */
  generationTokens: number;
  /** `sglang:num_requests_total`. */
  requests: number;
  /**
   * `sglang:time_to_first_token_seconds` sum (simulated seconds, from arrival at the worker) and
   * count; 0 from a worker that does not export them (an older sim-worker).
   */
  ttftSeconds: number;
  firstTokens: number;
}

const COUNTERS: Record<keyof WorkerCounters, string> = {
  promptTokens: "sglang:prompt_tokens_total",
  cachedTokens: "sglang:cached_tokens_total",
  generationTokens: "sglang:generation_tokens_total",
  requests: "sglang:num_requests_total",
  ttftSeconds: "sglang:time_to_first_token_seconds_sum",
  firstTokens: "sglang:time_to_first_token_seconds_count",
};
/** Counters an older sim-worker lacks: read as 0. */
const OPTIONAL = new Set<keyof WorkerCounters>(["ttftSeconds", "firstTokens"]);

/** The sim-worker command line (without host and port), for the report. */
export function simWorkerArgs(root: string, knobs: string[], modelPath?: string): string[] {
  return [
    "run",
    "--unstable-no-legacy-abort",
    `--allow-net=${HOST}`, // it listens there and dials nothing
    ...(modelPath
      ? ["--allow-env", `--allow-read=${modelPath}`]
      : ["--allow-env=RUST_LOG,SMG_LOG"]),
    `${root}main.ts`,
    "sim-worker",
    "--model",
    "sim-model",
    ...knobs,
  ];
}

/**
 * Starts `n` workers with `knobs` (sim-worker flags, the same for all or per worker index) and
 * waits until each answers /health (and, in gRPC mode, listens on its gRPC port). With
 * `modelPath`, the gRPC mode; with `kvEvents` too, HTTP workers publishing KV events instead.
 */
export async function startFleet(
  n: number,
  knobs: string[] | ((i: number) => string[]),
  tag: string,
  logDir: string,
  root: string,
  signal: AbortSignal,
  modelPath?: string,
  kvEvents = false,
): Promise<Fleet> {
  const ports = freePorts(n);
  // gRPC mode: each worker also serves the scheduler service, its words as Qwen3 token ids.
  const grpcPorts = modelPath && !kvEvents ? freePorts(n) : [];
  // KV-event mode: each worker tokenizes as the gateway does and publishes its events (a PUB
  // and a replay ROUTER).
  const kvPorts = modelPath && kvEvents ? freePorts(2 * n) : [];
  const extra = (i: number): string[] => {
    if (!modelPath) return [];
    if (kvEvents) {
      return [
        "--model-path",
        modelPath,
        "--kv-events-port",
        String(kvPorts[2 * i]),
        "--kv-events-replay-port",
        String(kvPorts[2 * i + 1]),
      ];
    }
    return ["--grpc-port", String(grpcPorts[i]), "--model-path", modelPath];
  };
  const children: Child[] = [];
  try {
    for (const [i, port] of ports.entries()) {
      signal.throwIfAborted(); // no new child once shutdown has begun
      children.push(
        await spawn(
          `${tag}-worker${i + 1}`,
          FLEET_CPU,
          [
            Deno.execPath(),
            ...simWorkerArgs(root, typeof knobs === "function" ? knobs(i) : knobs, modelPath),
            "--host",
            HOST,
            "--port",
            String(port),
            ...extra(i),
          ],
          logDir,
          root,
        ),
      );
    }
    const urls = ports.map((p) => `http://${HOST}:${p}`);
    await Promise.all(
      urls.map((u, i) => waitFor(`sim worker ${u}`, children[i], `${u}/health`, (s) => s === 200)),
    );
    // The gRPC service starts after HTTP, once the tokenizer is loaded: a gateway checking a
    // worker before it listens marks it unhealthy until its next health check.
    await Promise.all(
      grpcPorts.map((p, i) => waitForListener(`sim worker gRPC :${p}`, children[i], p)),
    );
    const targets = grpcPorts.length > 0 ? grpcPorts.map((p) => `grpc://${HOST}:${p}`) : urls;
    const labels = ports.map((_, i): Record<string, string> =>
      kvPorts.length > 0
        ? {
          kv_events: `tcp://${HOST}:${kvPorts[2 * i]}`,
          kv_events_replay: `tcp://${HOST}:${kvPorts[2 * i + 1]}`,
        }
        : {}
    );
    return { urls, targets, labels, children };
  } catch (e) {
    await stop(children);
    throw e;
  }
}

/** Sums of the counters in Prometheus text; throws naming any counter that is missing. */
export function parseCounters(text: string): WorkerCounters {
  const sums = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const name = line.match(/^[^\s{]+/)?.[0] ?? "";
    const value = Number(line.trim().split(/\s+/).at(-1));
    if (Number.isFinite(value)) sums.set(name, (sums.get(name) ?? 0) + value);
  }
  const out = {} as WorkerCounters;
  for (const [key, name] of Object.entries(COUNTERS) as [keyof WorkerCounters, string][]) {
    const v = sums.get(name) ?? (OPTIONAL.has(key) ? 0 : undefined);
    if (v === undefined) throw new Error(`no ${name} in the worker's /metrics`);
    out[key] = v;
  }
  return out;
}

/** Every worker's counters, read now. */
export function readCounters(urls: string[]): Promise<WorkerCounters[]> {
  return Promise.all(urls.map(async (u) => {
    const res = await fetch(`${u}/metrics`, { signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${u}/metrics: ${res.status} ${text.slice(0, 200)}`);
    return parseCounters(text);
  }));
}

/** `after - before`, counter by counter. */
export function delta(before: WorkerCounters, after: WorkerCounters): WorkerCounters {
  const out = {} as WorkerCounters;
  for (const key of Object.keys(COUNTERS) as (keyof WorkerCounters)[]) {
    out[key] = after[key] - before[key];
  }
  return out;
}
