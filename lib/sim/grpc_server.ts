/**
 * The simulated worker over sglang's scheduler gRPC service (`proto/sglang_scheduler.proto`),
 * the same engine model as the HTTP server (`server.ts`): token ids in, token ids out, cached
 * tokens counted by the engine's prefix cache, loads from its snapshot.
 *
 * `Generate` streams one `chunk` per generated token when the request asks for a stream, then a
 * `complete` (finish reason and usage; all output ids when not streaming). A cancelled call, or
 * `Abort` with the request id, aborts the engine request. Generated ids are the engine's output
 * pieces re-encoded by `encodeOutput` when one is given (a real tokenizer, so the gateway decodes
 * words), else the engine's own ids. `dieAfter` makes the worker fail its calls mid-stream with
 * UNAVAILABLE, as a crashed scheduler does. PD roles as over HTTP (`pd.ts`): a request with
 * `DisaggregatedParams` is prefilled with one token by a prefill worker, which then marks its
 * bootstrap room ready; a decode worker waits for the room (INTERNAL if it never comes) and
 * decodes without prefilling.
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import {
  type AckPb,
  decode,
  encode,
  type GenerateCompletePb,
  type GenerateRequestPb,
  jsonToStruct,
  type LoadsPb,
  METHODS,
  type MethodSpec,
  type ModelInfoPb,
} from "../grpc/sglang_proto.ts";
import type { SimEngine } from "./engine.ts";
import type { KvBatch } from "./kv_events.ts";
import { loadsBody } from "./observe.ts";
import { awaitRoom, type Bootstrap, type BootstrapRooms } from "./pd.ts";
import { VOCAB_SIZE } from "./tokenizer.ts";
import type { GenerateResult } from "./types.ts";

/** Options of the simulated gRPC worker. */
export interface SimGrpcOptions {
  /** Served model id. */
  model: string;
  /** Output length when a request sets none. */
  maxNewTokens: number;
  /** Generated text as token ids of the gateway's tokenizer (default: the engine's ids). */
  encodeOutput?: (text: string) => number[];
  /** Vocabulary size and end-of-sequence ids advertised by `GetModelInfo`. */
  vocabSize?: number;
  eosTokenIds?: number[];
  /** Fail calls with UNAVAILABLE after this many generations (0: never). */
  dieAfter?: number;
  /** Answer every `Generate` with UNAVAILABLE at once (health still passes). */
  failGenerate?: boolean;
  /**
   * Go silent after sending this many ids of a call (0: before its first message): the call stays
   * open with nothing more, as a stuck scheduler's does, until it is cancelled. Default never.
   */
  stallAfter?: number;
  /** PD role (regular): with `DisaggregatedParams`, prefill computes the prompt and one token. */
  role?: "regular" | "prefill" | "decode";
  /** Prefill role: the rooms served on the bootstrap port. */
  rooms?: BootstrapRooms;
  /** Decode role: how long to wait for the prefill partner's room (ms, 30000). */
  bootstrapTimeoutMs?: number;
}

/** Engine pieces whose `encodeOutput` ids are remembered at most. */
const MAX_ENCODED_PIECES = 8192;

const identity = (b: Buffer): Buffer => b;

function definition(m: MethodSpec): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path: m.path,
    requestStream: false,
    responseStream: m.serverStream,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}

const SERVICE: grpc.ServiceDefinition = Object.fromEntries(
  Object.values(METHODS).map((m) => [m.path.slice(m.path.lastIndexOf("/") + 1), definition(m)]),
);

/** The simulated scheduler service over one engine. */
export class SimGrpcServer {
  readonly #engine: SimEngine;
  readonly #o: SimGrpcOptions;
  readonly #server = new grpc.Server();
  readonly #inflight = new Map<string, AbortController>();
  readonly #pieces = new Map<string, number[]>();
  readonly #subscriptions = new Set<grpc.ServerWritableStream<Buffer, Buffer>>();
  #generated = 0;
  #port = 0;
  /** Sees every `Generate` request and its metadata (trace context) as it arrives (tests). */
  onGenerate: ((req: GenerateRequestPb, metadata: grpc.Metadata) => void) | null = null;
  /** Called once a `SubscribeKvEvents` call is subscribed to the engine's log (tests). */
  onKvSubscribe: (() => void) | null = null;

  constructor(engine: SimEngine, opts: SimGrpcOptions) {
    this.#engine = engine;
    this.#o = opts;
    this.#server.addService(SERVICE, {
      Generate: (call: grpc.ServerWritableStream<Buffer, Buffer>) => this.#generate(call),
      HealthCheck: this.#unary(METHODS.healthCheck, () => ({ healthy: true, message: "ok" })),
      Abort: this.#unary(METHODS.abort, (r: { request_id: string }) => this.#abort(r.request_id)),
      GetModelInfo: this.#unary(METHODS.getModelInfo, () => this.#modelInfo()),
      GetServerInfo: this.#unary(METHODS.getServerInfo, () => this.#serverInfo()),
      GetLoads: this.#unary(METHODS.getLoads, () => this.#loads()),
      FlushCache: this.#unary(METHODS.flushCache, (): AckPb => {
        const ok = this.#engine.flushCache();
        return { success: ok, message: ok ? "Cache flushed." : "requests are running" };
      }),
      SubscribeKvEvents: (call: grpc.ServerWritableStream<Buffer, Buffer>) =>
        this.#subscribeKv(call),
    });
  }

  /**
   * Binds `host:port` (0: any free port); resolves with the port. `credentials` default to
   * plaintext (tests pass TLS ones).
   */
  async serve(
    host: string,
    port: number,
    credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure(),
  ): Promise<number> {
    const h = host.includes(":") ? `[${host}]` : host;
    this.#port = await new Promise<number>((resolve, reject) => {
      this.#server.bindAsync(
        `${h}:${port}`,
        credentials,
        (e, p) => e ? reject(e) : resolve(p),
      );
    });
    return this.#port;
  }

  /** The bound port. */
  get port(): number {
    return this.#port;
  }

  /** Aborts what runs and stops serving. */
  async close(): Promise<void> {
    for (const a of this.#inflight.values()) a.abort();
    for (const call of this.#subscriptions) call.end();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => (this.#server.forceShutdown(), resolve()), 1000);
      this.#server.tryShutdown(() => (clearTimeout(force), resolve()));
    });
  }

  #unary<Req, Res extends object>(m: MethodSpec, fn: (req: Req) => Res) {
    return (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      try {
        cb(null, encode(m.response, fn(decode<Req>(m.request, call.request))));
      } catch (e) {
        cb({ code: grpc.status.INVALID_ARGUMENT, details: (e as Error).message });
      }
    };
  }

  /** Output ids for one engine token and its text. */
  #ids(engineId: number, piece: string): number[] {
    const enc = this.#o.encodeOutput;
    if (!enc) return [engineId];
    let ids = this.#pieces.get(piece);
    if (!ids) {
      ids = enc(piece);
      // The default words repeat; `--chars-per-token` pieces rarely do: keep the map bounded.
      if (this.#pieces.size >= MAX_ENCODED_PIECES) this.#pieces.clear();
      this.#pieces.set(piece, ids);
    }
    return ids;
  }

  /**
   * Streams the engine's KV event batches after the client's cursor (what the log still keeps),
   * then live ones, until the client cancels or the server closes.
   */
  #subscribeKv(call: grpc.ServerWritableStream<Buffer, Buffer>): void {
    let cursor: number;
    try {
      const req = decode<{ start_sequence_number: number }>(
        METHODS.subscribeKvEvents.request,
        call.request,
      );
      cursor = req.start_sequence_number;
    } catch (e) {
      return fail(call, grpc.status.INVALID_ARGUMENT, (e as Error).message);
    }
    const type = METHODS.subscribeKvEvents.response;
    const bs = this.#engine.config.blockSize;
    const off = this.#engine.kvEvents.subscribe(cursor, (b) => {
      call.write(encode(type, kvBatchPb(b, bs)));
    });
    this.#subscriptions.add(call);
    this.onKvSubscribe?.();
    const end = () => {
      off();
      this.#subscriptions.delete(call);
    };
    call.on("cancelled", end);
    call.on("close", end);
  }

  async #generate(call: grpc.ServerWritableStream<Buffer, Buffer>): Promise<void> {
    let req: GenerateRequestPb;
    try {
      req = decode<GenerateRequestPb>(METHODS.generate.request, call.request);
    } catch (e) {
      return fail(call, grpc.status.INVALID_ARGUMENT, (e as Error).message);
    }
    this.onGenerate?.(req, call.metadata);
    const tokens = req.tokenized?.input_ids ?? [];
    if (tokens.length === 0) {
      return fail(call, grpc.status.INVALID_ARGUMENT, "no input_ids");
    }
    const o = this.#o;
    if (o.failGenerate) return fail(call, grpc.status.UNAVAILABLE, "scheduler unavailable");
    const dying = (o.dieAfter ?? 0) > 0 && ++this.#generated > o.dieAfter!;
    const abort = new AbortController();
    const id = req.request_id || `sim-${this.#generated}`;
    this.#inflight.set(id, abort);
    call.on("cancelled", () => abort.abort());
    const out: number[] = [];
    const boot = bootstrapOf(req, o.role);
    let max = req.sampling_params?.max_new_tokens ?? o.maxNewTokens;
    // PD: the prefill leg computes the prompt and one token; the decode leg waits for its room
    // and then decodes without prefilling (the KV "arrived").
    if (boot && o.role === "prefill") max = 1;
    if (boot && o.role === "decode") {
      if (!(await awaitRoom(boot, o.bootstrapTimeoutMs ?? 30_000, abort.signal))) {
        this.#inflight.delete(id);
        const msg = `bootstrap room ${boot.room} not ready at ${boot.host}:${boot.port}`;
        return fail(call, grpc.status.INTERNAL, msg);
      }
    }
    const rType = METHODS.generate.response;
    let full = max === 0;
    const stallAfter = o.stallAfter ?? Infinity;
    let stalled = stallAfter === 0;
    let r: GenerateResult;
    try {
      r = await this.#engine.submit(
        {
          tokens,
          maxNewTokens: max,
          signal: abort.signal,
          kvTransferred: boot !== null && o.role === "decode",
        },
        (tok, i, piece) => {
          if (full || stalled) return;
          // One engine token may be several ids of the real tokenizer: count ids, as an engine does.
          const ids = this.#ids(tok, piece).slice(0, max - out.length);
          for (const x of ids) out.push(x);
          if (out.length >= max) {
            full = true;
            abort.abort();
          }
          if (dying && i >= 1) abort.abort();
          if (out.length >= stallAfter) {
            stalled = true;
            abort.abort();
          }
          if (!req.stream || ids.length === 0 || (abort.signal.aborted && !full)) return;
          call.write(encode(rType, {
            request_id: id,
            chunk: {
              token_ids: ids,
              prompt_tokens: tokens.length,
              completion_tokens: out.length,
              cached_tokens: 0,
            },
          }));
        },
      );
    } catch (e) {
      this.#inflight.delete(id);
      return fail(call, grpc.status.INVALID_ARGUMENT, (e as Error).message);
    }
    this.#inflight.delete(id);
    if (boot && o.role === "prefill" && (full || r.finishReason === "length")) {
      o.rooms?.markReady(boot.room);
    }
    if (stalled && !call.cancelled) {
      await new Promise<void>((resolve) => call.on("cancelled", () => resolve()));
    }
    if (call.cancelled) return;
    if (dying) return fail(call, grpc.status.UNAVAILABLE, "scheduler died");
    const complete: GenerateCompletePb = {
      output_ids: req.stream ? [] : out,
      finish_reason: full ? "length" : r.finishReason,
      prompt_tokens: r.promptTokens,
      completion_tokens: out.length,
      cached_tokens: r.cachedTokens,
      reasoning_tokens: 0,
      index: 0,
    };
    call.write(encode(rType, { request_id: id, complete }));
    call.end();
  }

  #abort(id: string): AckPb {
    const a = this.#inflight.get(id);
    a?.abort();
    return { success: a !== undefined, message: a ? "aborted" : "no such request" };
  }

  #modelInfo(): Partial<ModelInfoPb> {
    return {
      model_path: this.#o.model,
      tokenizer_path: this.#o.model,
      is_generation: true,
      served_model_name: this.#o.model,
      max_context_length: 32768,
      max_req_input_len: 32768,
      vocab_size: this.#o.vocabSize ?? VOCAB_SIZE,
      eos_token_ids: this.#o.eosTokenIds ?? [],
      model_type: "sim",
    };
  }

  #serverInfo(): object {
    const s = this.#engine.stats();
    return {
      server_args: jsonToStruct({
        model_path: this.#o.model,
        served_model_name: this.#o.model,
        max_running_requests: s.maxRunning,
      }),
      active_requests: s.running + s.waiting,
      sglang_version: "smg-sim",
      server_type: "grpc",
      max_total_num_tokens: s.maxTokens,
    };
  }

  #loads(): Partial<LoadsPb> {
    // `GetLoads` and `/v1/loads` share sglang's field names.
    return { ...(loadsBody(this.#engine.stats()) as Partial<LoadsPb>), version: "smg-sim" };
  }
}

/** The bootstrap address of a PD request to a prefill or decode worker, else null. */
function bootstrapOf(req: GenerateRequestPb, role: SimGrpcOptions["role"]): Bootstrap | null {
  const p = req.disaggregated_params;
  if (!p || role === undefined || role === "regular") return null;
  return {
    host: p.bootstrap_host || "127.0.0.1",
    port: p.bootstrap_port,
    room: String(p.bootstrap_room),
  };
}

/** Ends a server stream with a gRPC error status. */
function fail(call: grpc.ServerWritableStream<Buffer, Buffer>, code: grpc.status, details: string) {
  call.emit("error", { code, details, metadata: new grpc.Metadata() });
}

/**
 * A batch of the engine's KV events as a `KvEventBatch`: its block keys are the hashes (below
 * 2^53, so plain numbers on the way in).
 */
function kvBatchPb(b: KvBatch, blockSize: number): object {
  return {
    sequence_number: b.seq,
    timestamp: b.ts / 1000,
    events: b.events.map((e, i) => {
      const id = b.seq * 10_000 + i;
      if (e.type === "stored") {
        return {
          event_id: id,
          stored: {
            blocks: e.keys.map((k, j) => ({
              block_hash: k,
              token_ids: e.tokens.slice(j * blockSize, (j + 1) * blockSize),
              block_size: blockSize,
            })),
            ...(e.parent === null ? {} : { parent_block_hash: e.parent }),
          },
        };
      }
      if (e.type === "removed") {
        return { event_id: id, removed: { block_hashes: e.keys } };
      }
      return { event_id: id, cleared: {} };
    }),
  };
}
