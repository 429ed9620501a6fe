/**
 * The mesh transport over gRPC (`@grpc/grpc-js`), speaking the `Gossip` service of
 * `proto/mesh.proto`. In: requests, frames and handlers from the SWIM core and the stream
 * manager. Out: the peer's acks and frames, decoded by `codec.ts`, and `onRejected` reports for
 * what a peer sent that was refused (malformed bytes, over the inbound rate limit).
 *
 * One grpc-js client (one channel, one HTTP/2 connection) per peer address, reused by unary
 * calls and streams until `forget`. Channels back off 200 ms → 2 s between reconnects (grpc-js
 * defaults to 120 s, too slow to notice a restarted peer) and never retry a call: SWIM
 * decides what to resend. Every message is capped at `MAX_MESSAGE_BYTES` both ways; gzip or
 * deflate from a peer is accepted, our own sends are uncompressed. Proxy environment variables
 * are ignored (`grpc.enable_http_proxy: 0`): mesh peers are dialled directly.
 *
 * mTLS: with `tls` set, both sides must present a certificate signed by the mesh CA, and that
 * is the whole identity check. Host names are not checked: peers dial each other by IP, Deno's
 * `node:tls` refuses an IP as the TLS server name, and the mesh CA signs only mesh routers, so
 * every client asks for the fixed name `smg-mesh` and ignores the name in the server's cert.
 *
 * Known gaps: a message over 10 MiB is refused by grpc-js itself (RESOURCE_EXHAUSTED, after
 * reading only its 5-byte header) without any hook, so only pings and ping-reqs between 2 and
 * 10 MiB are reported as `oversized`. The rate limit is one bucket per remote host
 * (`host_buckets.ts`). `forget` leaves calls and streams already open to finish. After a failed
 * connect, grpc-js keeps an unref'd reconnect-backoff timer (at most ~2.4 s) and may dial once
 * more after its channel is closed; nothing public cancels that, so `close()` cannot await it
 * (see grpc_unreachable_test.ts).
 */

import { Buffer } from "node:buffer";
import { setImmediate } from "node:timers";
import * as grpc from "@grpc/grpc-js";
import type { Clock } from "../../core/clock.ts";
import { MAX_MESSAGE_BYTES, type MeshRequest } from "../wire.ts";
import type { MeshCertificates } from "./certificates.ts";
import * as codec from "./codec.ts";
import type { Decoded } from "./codec.ts";
import { deadConn, type DuplexCall, GrpcFrameConn } from "./grpc_stream.ts";
import { peerHost, PerHostBuckets } from "./host_buckets.ts";
import { quietGrpcLogs } from "../../core/grpc_logs.ts";
import type {
  FrameConn,
  MeshTransport,
  ReplyCallback,
  TransportError,
  TransportHandlers,
} from "./transport.ts";

/** How a `GrpcTransport` listens and dials. */
export interface GrpcTransportOptions {
  /** Address to bind. Default "0.0.0.0". */
  host?: string;
  /** Port to bind; 0 takes a free one (read it back from `port`). Default 0. */
  port?: number;
  /** The mesh CA and this router's certificate (mTLS), or null for plaintext. Default null. */
  tls?: MeshCertificates | null;
  /** Inbound unary requests per second, all peers together; Infinity disables. Default 500. */
  requestsPerSecond?: number;
  /** Requests allowed in a burst above the rate. Default 1000. */
  requestBurst?: number;
  /** The gateway's clock; the rate limit's refill reads it. */
  clock: Clock;
  /** How long `close()` lets in-flight calls finish before cutting them. Default 1000 ms. */
  shutdownGraceMs?: number;
}

/**
 * Environment variables grpc-js reads when it is imported (logging, TLS defaults, resolver and
 * load-balancer switches). Deno throws on a read it has no permission for, so every command that
 * loads this module needs them in `--allow-env`. Proxy variables are not read (proxying is off).
 */
export const GRPC_ENV_VARS: readonly string[] = [
  "GRPC_NODE_VERBOSITY",
  "GRPC_VERBOSITY",
  "GRPC_NODE_TRACE",
  "GRPC_TRACE",
  "GRPC_SSL_CIPHER_SUITES",
  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
  "GRPC_NODE_USE_ALTERNATIVE_RESOLVER",
  "GRPC_NODE_DEBUG_SEND_ERROR_DETAILS",
  "GRPC_EXPERIMENTAL_ENABLE_OUTLIER_DETECTION",
];

/** The name every client asks for over TLS (see the module comment). */
export const MESH_TLS_NAME = "smg-mesh";

const identity = (b: Buffer): Buffer => b;
const method = (path: string, stream: boolean): grpc.MethodDefinition<Buffer, Buffer> => ({
  path,
  requestStream: stream,
  responseStream: stream,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});
// Bytes pass through grpc-js untouched and are decoded here, so a bad message is reported and
// answered with INVALID_ARGUMENT instead of grpc-js's silent INTERNAL.
const GOSSIP: grpc.ServiceDefinition = {
  Ping: method(codec.GOSSIP_PATHS.ping, false),
  PingReq: method(codec.GOSSIP_PATHS.pingReq, false),
  SyncStream: method(codec.GOSSIP_PATHS.syncStream, true),
};

const COMMON_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  "grpc.enable_channelz": 0,
};
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  ...COMMON_OPTIONS,
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2000,
  "grpc.keepalive_time_ms": 10_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.enable_retries": 0,
  "grpc.enable_http_proxy": 0,
  "grpc.service_config_disable_resolution": 1,
  // Own subchannels per channel: `forget` then really drops the connection.
  "grpc.use_local_subchannel_pool": 1,
};

quietGrpcLogs(grpc);

/** The mesh transport routers use: gRPC over HTTP/2, optionally with mTLS. */
export class GrpcTransport implements MeshTransport {
  #host: string;
  #port: number;
  #tls: MeshCertificates | null;
  #graceMs: number;
  #clock: Clock;
  #buckets: PerHostBuckets;
  #clientCreds: grpc.ChannelCredentials;
  #channelOptions: grpc.ChannelOptions;
  #server: grpc.Server | null = null;
  #clients = new Map<string, grpc.Client>();
  #calls = new Set<grpc.ClientUnaryCall>();
  #pending = new Set<() => void>();
  #conns = new Set<GrpcFrameConn>();
  #handlers: TransportHandlers | null = null;
  #closed = false;

  /** Builds the transport; nothing listens until `serve`. Throws on unusable TLS material. */
  constructor(options: GrpcTransportOptions) {
    this.#host = options.host ?? "0.0.0.0";
    this.#port = options.port ?? 0;
    this.#tls = options.tls ?? null;
    this.#graceMs = options.shutdownGraceMs ?? 1000;
    this.#clock = options.clock;
    this.#buckets = new PerHostBuckets(
      options.requestsPerSecond ?? 500,
      options.requestBurst ?? 1000,
    );
    const t = this.#tls;
    this.#clientCreds = t
      ? grpc.experimental.createCertificateProviderChannelCredentials(t, t, {
        checkServerIdentity: () => undefined,
      })
      : grpc.credentials.createInsecure();
    this.#channelOptions = t
      ? {
        ...CHANNEL_OPTIONS,
        "grpc.ssl_target_name_override": MESH_TLS_NAME,
        "grpc.default_authority": MESH_TLS_NAME,
      }
      : CHANNEL_OPTIONS;
  }

  /** The bound port once `serve` resolved (the configured one before). */
  get port(): number {
    return this.#port;
  }

  /** Binds and serves; rejects if the address cannot be bound or the transport is closed. */
  async serve(handlers: TransportHandlers): Promise<void> {
    if (this.#closed || this.#server) throw new Error("mesh transport: closed or already serving");
    const server = new grpc.Server(COMMON_OPTIONS);
    server.addService(GOSSIP, {
      Ping: this.#unary(handlers, codec.decodePing),
      PingReq: this.#unary(handlers, codec.decodePingReq),
      SyncStream: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        if (this.#closed) return void call.end();
        handlers.onStream(this.#track(call, handlers));
      },
    });
    const t = this.#tls;
    const creds = t
      ? grpc.experimental.createCertificateProviderServerCredentials(t, t, true)
      : grpc.ServerCredentials.createInsecure();
    const host = this.#host.includes(":") ? `[${this.#host}]` : this.#host;
    try {
      this.#port = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`${host}:${this.#port}`, creds, (e, p) => e ? reject(e) : resolve(p))
      );
    } catch (e) {
      server.forceShutdown();
      throw new Error(`mesh transport: cannot bind ${host}:${this.#port}: ${message(e)}`);
    }
    this.#server = server;
    this.#handlers = handlers;
  }

  /** Sends `req` with a deadline of `timeoutMs`; `done` fires exactly once. */
  request(address: string, req: MeshRequest, timeoutMs: number, done: ReplyCallback): void {
    let fired = false;
    const finish: ReplyCallback = (err, reply) => {
      if (fired) return;
      fired = true;
      done(err, reply);
    };
    if (this.#closed) return queueMicrotask(() => finish(CLOSED, null));
    const isPing = req.kind === "ping";
    const path = isPing ? codec.GOSSIP_PATHS.ping : codec.GOSSIP_PATHS.pingReq;
    const bytes = isPing ? codec.encodePing(req) : codec.encodePingReq(req);
    // grpc-js takes deadlines as wall-clock times; only the difference from now matters here.
    const options = { deadline: Date.now() + timeoutMs };
    let call: grpc.ClientUnaryCall | undefined = undefined;
    const reply = (err: grpc.ServiceError | null, res?: Buffer) => {
      if (call) this.#calls.delete(call);
      if (err || !res) return finish(this.#callError(err), null);
      const ack = codec.decodeAck(res);
      if (ack.ok) return finish(null, ack.value);
      this.#handlers?.onRejected("malformed", `ack from ${address}: ${ack.detail}`);
      finish(
        { code: "unreachable", message: `malformed ack from ${address}: ${ack.detail}` },
        null,
      );
    };
    try {
      const client = this.#client(address);
      call = client.makeUnaryRequest(path, identity, identity, bytes, options, reply);
      this.#calls.add(call);
    } catch (e) {
      queueMicrotask(() => finish({ code: "unreachable", message: message(e) }, null));
    }
  }

  /** Opens a sync stream to `address` on the peer's cached channel. */
  openStream(address: string): FrameConn {
    if (this.#closed) return deadConn("transport closed");
    try {
      const call = this.#client(address).makeBidiStreamRequest<Buffer, Buffer>(
        codec.GOSSIP_PATHS.syncStream,
        identity,
        identity,
      );
      return this.#track(call, this.#handlers);
    } catch (e) {
      return deadConn(`unreachable: ${message(e)}`);
    }
  }

  /** Closes the channel to `address`, if any. */
  forget(address: string): void {
    const client = this.#clients.get(address);
    this.#clients.delete(address);
    if (client) closeSoon(client);
  }

  /** Stops serving, cancels every call and stream and closes every channel. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const conn of this.#conns) conn.close();
    for (const call of this.#calls) call.cancel();
    for (const abort of this.#pending) abort();
    for (const client of this.#clients.values()) closeSoon(client);
    this.#clients.clear();
    await new Promise((resolve) => setImmediate(resolve));
    const server = this.#server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      // Real time, not the clock: this bounds grpc-js's own shutdown, whose timers are real.
      const force = setTimeout(() => (server.forceShutdown(), resolve()), this.#graceMs);
      server.tryShutdown(() => (clearTimeout(force), resolve()));
    });
  }

  #client(address: string): grpc.Client {
    let client = this.#clients.get(address);
    if (!client) {
      client = new grpc.Client(address, this.#clientCreds, this.#channelOptions);
      this.#clients.set(address, client);
    }
    return client;
  }

  #callError(err: grpc.ServiceError | null): TransportError {
    if (this.#closed) return CLOSED;
    if (err?.code === grpc.status.DEADLINE_EXCEEDED) {
      return { code: "timeout", message: err.message };
    }
    return { code: "unreachable", message: err?.message ?? "empty reply" };
  }

  #track(call: DuplexCall, handlers: TransportHandlers | null): GrpcFrameConn {
    const conn = new GrpcFrameConn(call, {
      malformed: (detail) => handlers?.onRejected("malformed", detail),
      done: (c) => this.#conns.delete(c),
    });
    this.#conns.add(conn);
    return conn;
  }

  #unary<T extends MeshRequest>(
    handlers: TransportHandlers,
    decode: (b: Buffer) => Decoded<T>,
  ): grpc.handleUnaryCall<Buffer, Buffer> {
    return (call, callback) => {
      const peer = call.getPeer();
      if (call.request.length > MAX_REQUEST_BYTES) {
        handlers.onRejected("oversized", `${call.request.length}-byte request from ${peer}`);
        return callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: "request too large" });
      }
      if (!this.#buckets.take(peerHost(peer), this.#clock.now())) {
        handlers.onRejected("flood", `request from ${peer} over the inbound rate limit`);
        return callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: "mesh rate limit" });
      }
      const req = decode(call.request);
      if (!req.ok) {
        handlers.onRejected("malformed", `request from ${peer}: ${req.detail}`);
        return callback({ code: grpc.status.INVALID_ARGUMENT, details: req.detail });
      }
      let answered = false;
      const answer: grpc.sendUnaryData<Buffer> = (err, value) => {
        if (answered) return;
        answered = true;
        this.#pending.delete(abort);
        callback(err, value);
      };
      const abort = () => answer({ code: grpc.status.UNAVAILABLE, details: "shutting down" });
      this.#pending.add(abort);
      call.once("cancelled", () => (answered = true, this.#pending.delete(abort)));
      handlers.onRequest(req.value, (ack) => answer(null, codec.encodeAck(ack)));
    };
  }
}

/**
 * Largest ping or ping-req accepted (2 MiB): a whole member table of 10,000 routers is about
 * 0.5 MiB; sync streams keep the full 10 MiB.
 */
export const MAX_REQUEST_BYTES = 2 * 1024 * 1024;

const CLOSED: TransportError = { code: "closed", message: "mesh transport closed" };

/**
 * Closes a channel after pending immediates have run. grpc-js 1.14 hands an IP target's
 * address to the channel in a `setImmediate` and never checks that the channel was closed in
 * the meantime: a channel closed before that keeps reconnecting forever.
 */
function closeSoon(client: grpc.Client): void {
  setImmediate(() => client.close());
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
