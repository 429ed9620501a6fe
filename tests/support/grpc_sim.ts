/**
 * A simulated sglang scheduler for tests (`SimGrpcServer` on a real loopback port), its output as
 * Qwen3 token ids (the gateway's test tokenizer), decoding fast (`decodeBaseMs` a step) with
 * instant prefill; what it serves and how it fails come in `o`.
 */

import type { ServerCredentials } from "@grpc/grpc-js";
import { SimEngine } from "../../lib/sim/engine.ts";
import { type SimGrpcOptions, SimGrpcServer } from "../../lib/sim/grpc_server.ts";
import { realTime } from "../../lib/sim/worker.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { DEFAULTS } from "../../support/sim_engine.ts";

/** A running simulated scheduler. */
export interface GrpcSim {
  engine: SimEngine;
  server: SimGrpcServer;
  /** Its `grpc://` URL. */
  url: string;
  /** Stops its server and engine. */
  close(): Promise<void>;
}

/**
 * Starts a simulated scheduler serving `qwen3-sim` (8 new tokens unless asked); with `creds`, over
 * TLS (`grpcs://`).
 */
export async function grpcSim(
  o: Partial<SimGrpcOptions> = {},
  decodeBaseMs = 0.2,
  creds?: ServerCredentials,
): Promise<GrpcSim> {
  const tok = qwen3();
  const engine = new SimEngine(
    { ...DEFAULTS, decodeBaseMs, decodePerReqMs: 0, prefillTps: 1e9 },
    realTime,
  );
  const server = new SimGrpcServer(engine, {
    model: "qwen3-sim",
    maxNewTokens: 8,
    encodeOutput: (t) => tok.encode(t, false),
    vocabSize: tok.vocabSize,
    eosTokenIds: [...tok.eosTokenIds],
    ...o,
  });
  const port = await server.serve("127.0.0.1", 0, creds);
  return {
    engine,
    server,
    url: `${creds ? "grpcs" : "grpc"}://127.0.0.1:${port}`,
    close: async () => {
      await server.close();
      await engine.close();
    },
  };
}
