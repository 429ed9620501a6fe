/**
 * A gRPC client of one sglang scheduler (a `grpc://` or `grpcs://` worker): one `@grpc/grpc-js`
 * channel per worker, reused by every call, messages encoded and decoded by
 * `sglang_proto.ts`. `generate` returns the server stream as a pull-based reader (the call is
 * paused while nothing is read, so a slow client slows the worker's stream down, not the
 * gateway's memory up); cancelling it cancels the call, which sglang's server turns into an
 * abort. A failed call rejects with `GrpcCallError`, which keeps the gRPC status code.
 */

import { Buffer } from "node:buffer";
import { isIP } from "node:net";
import { checkServerIdentity, rootCertificates } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import type { Abortable } from "../core/http.ts";
import { quietGrpcLogs } from "../core/grpc_logs.ts";
import { decodeKvEventBatch } from "./kv_wire.ts";
import {
  type AckPb,
  decode,
  encode,
  type GenerateRequestPb,
  type GenerateResponsePb,
  type HealthCheckResponsePb,
  type KvEventBatchPb,
  type LoadsPb,
  METHODS,
  type MethodSpec,
  type ModelInfoPb,
  type ServerInfoPb,
  structToJson,
} from "./sglang_proto.ts";

/** A failed call, with its gRPC status. */
export class GrpcCallError extends Error {
  /** `grpc.status` code. */
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
    this.name = "GrpcCallError";
  }

  /** The status name (`UNAVAILABLE`, ...). */
  get statusName(): string {
    return grpc.status[this.code] ?? String(this.code);
  }
}

/** Whether a failed call may be retried on another worker (the worker, not the request, failed). */
export function retryableStatus(code: number): boolean {
  return code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED ||
    code === grpc.status.RESOURCE_EXHAUSTED || code === grpc.status.INTERNAL ||
    code === grpc.status.UNKNOWN || code === grpc.status.ABORTED;
}

/** A `Generate` server stream, read one message at a time. */
export interface GenerateStream {
  /** The next message; null at the end; rejects with `GrpcCallError`. */
  next(): Promise<GenerateResponsePb | null>;
  /** Cancels the call (the worker aborts the request). */
  cancel(): void;
  /** Ends the call with `e` (a missed progress deadline): the next read rejects with it. */
  expire?(e: Error): void;
}

const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  "grpc.enable_channelz": 0,
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2000,
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.enable_retries": 0,
  "grpc.enable_http_proxy": 0,
  "grpc.service_config_disable_resolution": 1,
  // Own subchannels per channel: closing it really drops the connection and its reconnect timer.
  "grpc.use_local_subchannel_pool": 1,
};

quietGrpcLogs(grpc);

const identity = (b: Buffer): Buffer => b;

/** `host:port` and TLS of a `grpc://` or `grpcs://` URL. */
export function grpcTarget(url: string): { address: string; tls: boolean } {
  const u = new URL(url);
  if (u.protocol !== "grpc:" && u.protocol !== "grpcs:") {
    throw new Error(`not a gRPC worker URL: ${url}`);
  }
  const tls = u.protocol === "grpcs:";
  return { address: `${u.hostname}:${u.port || (tls ? 443 : 80)}`, tls };
}

/** What `grpcs://` workers are reached with. */
export interface WorkerTlsPem {
  /** CA certificates (PEM) trusted besides the system's. */
  caCerts: string[];
  /** The certificate chain and key (PEM) presented to workers that ask (mTLS), or null. */
  client: { cert: string; key: string } | null;
}

/**
 * The TLS server name sent to a worker dialled by IP address. A client sends none for an IP (RFC
 * 6066), but Deno's `node:tls` refuses an IP there and grpc-js always sets one; the worker's
 * certificate is still checked against the IP (its subjectAltName).
 */
const IP_SERVER_NAME = "smg-worker";

/**
 * The system's root CAs (PEM); none where the process may not read them (Deno asks for
 * `--allow-sys=ca`; the gateway warns at start, `worker_clients.ts`).
 */
function systemRoots(): readonly string[] {
  try {
    // Deno's `rootCertificates` is a proxy that asks for the permission when it is first read.
    return [...(rootCertificates ?? [])];
  } catch (e) {
    if (e instanceof Deno.errors.NotCapable) return [];
    throw e;
  }
}

/** Channel credentials and options for `url`'s worker (see `IP_SERVER_NAME`). */
function channel(
  url: string,
  tls: WorkerTlsPem | undefined,
): { address: string; creds: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  const { address, tls: secure } = grpcTarget(url);
  if (!secure) {
    return { address, creds: grpc.credentials.createInsecure(), options: CHANNEL_OPTIONS };
  }
  // Given CAs replace node's roots in grpc-js: keep the system's too, as HTTP workers do.
  const roots = tls?.caCerts.length
    ? Buffer.from([...systemRoots(), ...tls.caCerts].join("\n"))
    : null;
  const key = tls?.client ? Buffer.from(tls.client.key) : null;
  const cert = tls?.client ? Buffer.from(tls.client.cert) : null;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) === 0) {
    return {
      address,
      creds: grpc.credentials.createSsl(roots, key, cert),
      options: CHANNEL_OPTIONS,
    };
  }
  const creds = grpc.credentials.createSsl(roots, key, cert, {
    checkServerIdentity: (_name, c) => checkServerIdentity(host, c),
  });
  return {
    address,
    creds,
    options: { ...CHANNEL_OPTIONS, "grpc.ssl_target_name_override": IP_SERVER_NAME },
  };
}

/** A client of one worker's scheduler service. */
export class SglangClient {
  readonly url: string;
  readonly #client: grpc.Client;
  #closed = false;

  /** A client of `url`; `tls` for `grpcs://` workers (default: the system's CAs, no client cert). */
  constructor(url: string, tls?: WorkerTlsPem) {
    this.url = url;
    const { address, creds, options } = channel(url, tls);
    this.#client = new grpc.Client(address, creds, options);
  }

  /**
   * Starts a generation with `metadata` (W3C trace context, say); the stream's first message may
   * already be an error.
   */
  generate(
    req: GenerateRequestPb,
    cancel?: Abortable,
    metadata?: readonly [string, string][],
  ): GenerateStream {
    const m = METHODS.generate;
    const md = new grpc.Metadata();
    for (const [k, v] of metadata ?? []) md.set(k, v);
    const call = this.#client.makeServerStreamRequest<Buffer, Buffer>(
      m.path,
      identity,
      identity,
      encode(m.request, req),
      md,
    );
    return new ServerStream(
      call,
      m.response.name,
      (b) => decode<GenerateResponsePb>(m.response, b),
      cancel,
    );
  }

  /** Asks the worker to abort `requestId`. */
  async abort(requestId: string, reason: string, timeoutMs = 5000): Promise<AckPb> {
    return await this.#unary<AckPb>(METHODS.abort, { request_id: requestId, reason }, timeoutMs);
  }

  /** The worker's health. */
  async healthCheck(timeoutMs: number): Promise<HealthCheckResponsePb> {
    return await this.#unary<HealthCheckResponsePb>(METHODS.healthCheck, {}, timeoutMs);
  }

  /** What model the worker serves. */
  async modelInfo(timeoutMs: number): Promise<ModelInfoPb> {
    return await this.#unary<ModelInfoPb>(METHODS.getModelInfo, {}, timeoutMs);
  }

  /** The worker's server info, `Struct`s as JSON. */
  async serverInfo(timeoutMs: number): Promise<ServerInfoPb> {
    const r = await this.#unary<ServerInfoPb>(METHODS.getServerInfo, {}, timeoutMs);
    return {
      ...r,
      server_args: structToJson(r.server_args),
      scheduler_info: structToJson(r.scheduler_info),
    };
  }

  /** The worker's load snapshot per DP rank. */
  async loads(timeoutMs: number): Promise<LoadsPb> {
    return await this.#unary<LoadsPb>(METHODS.getLoads, { include: ["core", "queues"] }, timeoutMs);
  }

  /**
   * Subscribes to the worker's KV cache events from after `cursor` (the last batch applied; 0:
   * live only); `cancel` ends the subscription.
   */
  subscribeKvEvents(cursor: number, cancel?: Abortable): ServerStream<KvEventBatchPb> {
    const m = METHODS.subscribeKvEvents;
    const call = this.#client.makeServerStreamRequest<Buffer, Buffer>(
      m.path,
      identity,
      identity,
      encode(m.request, { start_sequence_number: cursor }),
    );
    return new ServerStream(call, m.response.name, decodeKvEventBatch, cancel);
  }

  /** Flushes the worker's KV cache. */
  async flushCache(timeoutMs: number): Promise<AckPb> {
    return await this.#unary<AckPb>(METHODS.flushCache, { timeout_s: 0 }, timeoutMs);
  }

  /** Closes the channel; resolves once it is closed. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    // grpc-js hands an IP target to the channel in a `setImmediate`; close after it ran.
    return new Promise((resolve) =>
      setImmediate(() => {
        this.#client.close();
        resolve();
      })
    );
  }

  #unary<T>(m: MethodSpec, req: object, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest<Buffer, Buffer>(
        m.path,
        identity,
        identity,
        encode(m.request, req),
        { deadline: Date.now() + timeoutMs },
        (err, bytes) => {
          if (err) {
            return reject(
              new GrpcCallError(err.code ?? grpc.status.UNKNOWN, err.details || err.message),
            );
          }
          try {
            resolve(decode<T>(m.response, bytes!));
          } catch (e) {
            reject(
              new GrpcCallError(
                grpc.status.INTERNAL,
                `undecodable ${m.response.name}: ${(e as Error).message}`,
              ),
            );
          }
        },
      );
    });
  }
}

/** High-water mark of decoded messages queued before the call is paused. */
const QUEUE_MAX = 16;

/** A server stream as a pull-based reader of decoded messages. */
export class ServerStream<T> {
  readonly #call: grpc.ClientReadableStream<Buffer>;
  readonly #queue: T[] = [];
  #ended = false;
  #error: Error | null = null;
  #waiter: PromiseWithResolvers<T | null> | null = null;
  readonly #cancel?: Abortable;

  /** Reads `call`'s messages (named `name` in errors) through `decode`. */
  constructor(
    call: grpc.ClientReadableStream<Buffer>,
    name: string,
    decode: (b: Buffer) => T,
    cancel?: Abortable,
  ) {
    this.#call = call;
    this.#cancel = cancel;
    call.on("data", (b: Buffer) => {
      let msg: T;
      try {
        msg = decode(b);
      } catch (e) {
        this.#fail(
          new GrpcCallError(grpc.status.INTERNAL, `undecodable ${name}: ${(e as Error).message}`),
        );
        call.cancel();
        return;
      }
      const w = this.#waiter;
      if (w) {
        this.#waiter = null;
        w.resolve(msg);
      } else {
        this.#queue.push(msg);
        if (this.#queue.length >= QUEUE_MAX) call.pause();
      }
    });
    call.on("error", (e: grpc.ServiceError) => {
      this.#fail(new GrpcCallError(e.code ?? grpc.status.UNKNOWN, e.details || e.message));
    });
    call.on("end", () => {
      this.#ended = true;
      this.#settle();
    });
    if (cancel) cancel.on(this.cancel);
  }

  /** The next message; null at the end; rejects with `GrpcCallError`. */
  next(): Promise<T | null> {
    const msg = this.#queue.shift();
    if (msg) {
      if (this.#queue.length < QUEUE_MAX / 2) this.#call.resume();
      return Promise.resolve(msg);
    }
    if (this.#error) return Promise.reject(this.#error);
    if (this.#ended) return Promise.resolve(null);
    this.#call.resume();
    this.#waiter = Promise.withResolvers();
    return this.#waiter.promise;
  }

  /** Ends the call with `e`: the next read rejects with it, and the worker aborts the request. */
  readonly expire = (e: Error): void => {
    if (this.#ended || this.#error) return;
    this.#fail(e);
    this.#call.cancel();
  };

  /** Cancels the call. */
  readonly cancel = (): void => {
    this.#cancel?.off(this.cancel);
    if (this.#ended || this.#error) return;
    this.#fail(new GrpcCallError(grpc.status.CANCELLED, "call cancelled"));
    this.#call.cancel();
  };

  #fail(e: Error): void {
    if (this.#error || this.#ended) return;
    this.#error = e;
    this.#settle();
  }

  #settle(): void {
    this.#cancel?.off(this.cancel);
    const w = this.#waiter;
    if (!w || this.#queue.length > 0) return;
    this.#waiter = null;
    if (this.#error) w.reject(this.#error);
    else w.resolve(null);
  }
}
