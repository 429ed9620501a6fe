/**
 * Fixtures for the gRPC transport tests: a serving transport on loopback port 0 whose handlers
 * record what they saw and resolve promises instead of being polled, a frame-stream listener,
 * raw grpc-js clients that bypass our codec, a byte-counting TCP proxy, and a throwaway mesh CA
 * made with `openssl`.
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { systemClock } from "../../../lib/core/clock.ts";
import { GrpcTransport, type GrpcTransportOptions } from "../../../lib/mesh/transport/grpc.ts";
import type {
  FrameConn,
  RejectReason,
  TransportHandlers,
} from "../../../lib/mesh/transport/transport.ts";
import type { AckMessage, MeshRequest, PingMessage, StreamFrame } from "../../../lib/mesh/wire.ts";
import { GOSSIP_PATHS } from "../../../lib/mesh/transport/codec.ts";
import { openssl } from "../../../support/gateway_process.ts";

/** An ack from `from` echoing `req`'s seq. */
export function ackFor(req: MeshRequest, from: string): AckMessage {
  return { seq: req.seq, from, nack: false, updates: [], fullState: false, error: "" };
}

/** A serving transport and what its handlers saw. */
export interface Node {
  t: GrpcTransport;
  address: string;
  requests: MeshRequest[];
  rejected: [RejectReason, string][];
  /** Resolves with the next accepted stream. */
  nextStream(): Promise<FrameConn>;
  /** Resolves with the next rejection. */
  nextRejection(): Promise<[RejectReason, string]>;
}

/** How a test node answers a request (default: an ack from its name). */
export type Answer = (req: MeshRequest, respond: (ack: AckMessage) => void) => void;

/** Starts a transport on 127.0.0.1:0 named `name`. */
export async function startNode(
  name: string,
  options: Partial<GrpcTransportOptions> = {},
  answer: Answer = (req, respond) => respond(ackFor(req, name)),
): Promise<Node> {
  const t = new GrpcTransport({ host: "127.0.0.1", port: 0, clock: systemClock, ...options });
  const streams = new Queue<FrameConn>();
  const rejections = new Queue<[RejectReason, string]>();
  const node: Node = {
    t,
    address: "",
    requests: [],
    rejected: [],
    nextStream: () => streams.next(),
    nextRejection: () => rejections.next(),
  };
  const handlers: TransportHandlers = {
    onRequest(req, respond) {
      node.requests.push(req);
      answer(req, respond);
    },
    onStream: (conn) => streams.push(conn),
    onRejected(reason, detail) {
      node.rejected.push([reason, detail]);
      rejections.push([reason, detail]);
    },
  };
  await t.serve(handlers);
  node.address = `127.0.0.1:${t.port}`;
  return node;
}

/** Values in arrival order, awaited one at a time. */
export class Queue<T> {
  #items: T[] = [];
  #waiters: ((v: T) => void)[] = [];

  /** Adds a value, handing it to the oldest waiter if there is one. */
  push(v: T): void {
    const w = this.#waiters.shift();
    if (w) w(v);
    else this.#items.push(v);
  }

  /** The next value. */
  next(): Promise<T> {
    if (this.#items.length > 0) return Promise.resolve(this.#items.shift()!);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/** A stream's receiving side, recorded. */
export interface Listened {
  frames: Queue<StreamFrame>;
  drains: Queue<void>;
  /** Resolves with the first close reason. */
  closed: Promise<string>;
  /** How many times onClose fired. */
  closes(): number;
}

/** Installs recording handlers on `conn`. */
export function listen(conn: FrameConn): Listened {
  const frames = new Queue<StreamFrame>();
  const drains = new Queue<void>();
  const { promise, resolve } = Promise.withResolvers<string>();
  let closes = 0;
  conn.listen({
    onFrame: (f) => frames.push(f),
    onDrain: () => drains.push(),
    onClose(reason) {
      closes++;
      resolve(reason);
    },
  });
  return { frames, drains, closed: promise, closes: () => closes };
}

/** Sends `req` and resolves with the callback's arguments. */
export function ask(
  t: GrpcTransport,
  address: string,
  req: MeshRequest,
  timeoutMs = 5000,
): Promise<{ err: { code: string; message: string } | null; reply: AckMessage | null }> {
  return new Promise((resolve) =>
    t.request(address, req, timeoutMs, (err, reply) => resolve({ err, reply }))
  );
}

/** A ping from `from` with no updates. */
export function ping(from: string, seq = 1): PingMessage {
  return { kind: "ping", seq, from, fromAddress: "", to: "", updates: [], fullState: false };
}

const raw = (b: Buffer) => b;

/** A grpc-js client that sends and receives raw bytes on the Gossip paths. */
export function rawClient(address: string, options: grpc.ChannelOptions = {}): grpc.Client {
  return new grpc.Client(address, grpc.credentials.createInsecure(), options);
}

/** A unary call of raw bytes; resolves with the status code (0 = OK). */
export function rawUnary(
  client: grpc.Client,
  bytes: Buffer,
  path = GOSSIP_PATHS.ping,
): Promise<number> {
  return new Promise((resolve) =>
    client.makeUnaryRequest(
      path,
      raw,
      raw,
      bytes,
      { deadline: Date.now() + 5000 },
      (e) => resolve(e ? e.code : 0),
    )
  );
}

/** Opens a raw SyncStream call. */
export function rawStream(client: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> {
  return client.makeBidiStreamRequest<Buffer, Buffer>(GOSSIP_PATHS.syncStream, raw, raw);
}

/** A TCP proxy to `targetPort` on loopback that counts client → server bytes. */
export function countingProxy(targetPort: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const pipes: Promise<void>[] = [];
  let upstreamBytes = 0;
  const accepting = (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
      conns.push(client, server);
      pipes.push(pump(client, server, (n) => upstreamBytes += n), pump(server, client, () => {}));
    }
  })().catch(() => {});
  return {
    address: `127.0.0.1:${listener.addr.port}`,
    upstreamBytes: () => upstreamBytes,
    async close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* already closed by the pump */ }
      }
      await accepting;
      await Promise.allSettled(pipes);
    },
  };
}

async function pump(from: Deno.Conn, to: Deno.Conn, count: (n: number) => void): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      count(n);
      for (let off = 0; off < n;) off += await to.write(buf.subarray(off, n));
    }
    await to.closeWrite();
  } catch { /* either side went away */ }
}

/** PEM files of a throwaway mesh CA, two routers it signed, and a self-signed impostor. */
export interface MeshCerts {
  ca: string;
  a: { cert: string; key: string };
  b: { cert: string; key: string };
  evil: { cert: string; key: string };
}

/** Makes `MeshCerts` with openssl in a temp dir under /tmp, removed before returning. */
export async function makeCerts(): Promise<MeshCerts> {
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "smg-mesh-certs-" });
  const run = (...args: string[]) => openssl(dir, ...args);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  try {
    await Deno.writeTextFile(
      `${dir}/leaf.ext`,
      "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    await run(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.crt",
      "-days",
      "1",
      "-subj",
      "/CN=mesh-ca",
    );
    for (const n of ["a", "b"]) {
      await run(
        "req",
        ...ec,
        "-keyout",
        `${n}.key`,
        "-out",
        `${n}.csr`,
        "-subj",
        `/CN=router-${n}`,
      );
      await run(
        "x509",
        "-req",
        "-in",
        `${n}.csr`,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        `${n}.crt`,
        "-days",
        "1",
        "-extfile",
        "leaf.ext",
      );
    }
    await run(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "evil.key",
      "-out",
      "evil.crt",
      "-days",
      "1",
      "-subj",
      "/CN=mesh-ca",
    );
    const read = (f: string) => Deno.readTextFile(`${dir}/${f}`);
    const pair = async (n: string) => ({
      cert: await read(`${n}.crt`),
      key: await read(`${n}.key`),
    });
    return {
      ca: await read("ca.crt"),
      a: await pair("a"),
      b: await pair("b"),
      evil: await pair("evil"),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
