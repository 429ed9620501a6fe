/**
 * Starts one simulated worker: an engine, its HTTP server and the listener, and its KV-event
 * publisher when asked, in this process.
 * Used by `smg sim-worker` and by `smg serve --backend sim` (in-process workers) and tests.
 */

import { seededRandom, sleep, systemClock } from "../core/clock.ts";
import { type EngineDeps, SimEngine } from "./engine.ts";
import { SimKvPublisher } from "./kv_publisher.ts";
import { BootstrapRooms } from "./pd.ts";
import { RatioTokenizer } from "./ratio_tokenizer.ts";
import { SimServer, type SimServerOptions } from "./server.ts";
import { type SimTokenizer, WORD_TOKENIZER } from "./tokenizer.ts";
import type { EngineConfig } from "./types.ts";

/** Where and how a simulated worker listens. */
export interface SimWorkerOptions {
  /** Listen address (127.0.0.1). */
  host: string;
  /** Listen port; 0 picks a free one. */
  port: number;
  /** Engine settings. */
  engine: EngineConfig;
  /** Server behaviour (model, faults); `sleep` and `random` are filled in when absent. */
  server:
    & Omit<SimServerOptions, "sleep" | "random">
    & Partial<Pick<SimServerOptions, "sleep" | "random">>;
  /** Seed for the fault knobs and the generated text. */
  seed: number;
  /** Prefill role: the bootstrap port decode workers wait on (0 picks one). */
  bootstrapPort: number;
  /** Also serve the scheduler gRPC service on this port (`--grpc-port`), or null. */
  grpcPort?: number | null;
  /**
   * The gateway's tokenizer (`--model-path`), or null: the command loads it into
   * `server.promptTokens` and the gRPC server's output ids.
   */
  modelPath?: string | null;
  /**
   * Mean characters per token of the stand-in tokenizer (`--chars-per-token`: `RatioTokenizer`,
   * prompts and generated text), or null for the default word chunks (`WORD_TOKENIZER`).
   */
  charsPerToken?: number | null;
  /** Publish the engine's KV events on a ZeroMQ PUB on this port (`--kv-events-port`), or null. */
  kvEventsPort?: number | null;
  /** With `kvEventsPort`: their replay ROUTER's port (`--kv-events-replay-port`), or null. */
  kvEventsReplayPort?: number | null;
}

/** A running simulated worker. */
export interface SimWorker {
  /** Base URL. */
  url: string;
  /** The engine, for tests and in-process inspection. */
  engine: SimEngine;
  /** Prefill role: the bootstrap port; null otherwise. */
  bootstrapPort: number | null;
  /** Prefill role: the rooms served on the bootstrap port (shared with a gRPC server). */
  rooms?: BootstrapRooms;
  /** The KV-event publisher (`kvEventsPort`), or null. */
  kvEvents: SimKvPublisher | null;
  /** Stops serving and the engine. */
  close(): Promise<void>;
}

/** Starts a simulated worker and resolves once it listens. */
export function startSimWorker(o: SimWorkerOptions): SimWorker {
  const scale = o.engine.timeScale;
  const simSleep = (ms: number) => sleep(systemClock, ms * scale);
  const tokenizer = simTokenizer(o.charsPerToken ?? null);
  const engine = new SimEngine(o.engine, { ...simDeps(o.seed), tokenizer });
  const rooms = o.server.role === "prefill"
    ? new BootstrapRooms(o.host, o.bootstrapPort)
    : undefined;
  const server = new SimServer(engine, {
    random: seededRandom(o.seed ^ 0x5bd1e995),
    sleep: simSleep,
    rooms,
    tokenizer,
    ...o.server,
  });
  const kvEvents = o.kvEventsPort === null || o.kvEventsPort === undefined
    ? null
    : new SimKvPublisher(engine.kvEvents, {
      host: o.host,
      port: o.kvEventsPort,
      replayPort: o.kvEventsReplayPort ?? null,
      blockSize: o.engine.blockSize,
      clock: systemClock,
    });
  const http = Deno.serve({ hostname: o.host, port: o.port, onListen: () => {} }, server.handle);
  let closed: Promise<void> | null = null;
  return {
    url: `http://${o.host}:${http.addr.port}`,
    engine,
    bootstrapPort: rooms?.port ?? null,
    rooms,
    kvEvents,
    close: () =>
      closed ??= (async () => {
        await engine.close();
        await Promise.all([http.shutdown(), rooms?.close(), kvEvents?.close()]);
      })(),
  };
}

/** The stand-in tokenizer at `charsPerToken` characters per token, or the default (null). */
export function simTokenizer(charsPerToken: number | null): SimTokenizer {
  return charsPerToken === null ? WORD_TOKENIZER : new RatioTokenizer(charsPerToken);
}

/** The engine's clock and sleeper in wall time (the engine applies `timeScale` itself). */
export const realTime: Pick<EngineDeps, "now" | "sleep"> = {
  now: () => systemClock.now(),
  sleep: (ms, signal) => sleep(systemClock, ms, signal),
};

/** Engine dependencies in wall time; the engine applies `timeScale` itself. */
export function simDeps(seed: number): EngineDeps {
  return { ...realTime, random: seededRandom(seed) };
}
