/**
 * OTLP/gRPC: the unary `TraceService/Export` call over grpc-js, the request's bytes written as
 * they are (no message classes), on one channel kept open between batches.
 */

import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import type { Transport } from "./export.ts";
import { quietGrpcLogs } from "../core/grpc_logs.ts";

quietGrpcLogs(grpc);

const EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/** OTLP over gRPC toward `endpoint` (`http://` plain, `https://` TLS with the system's CAs). */
export class GrpcTransport implements Transport {
  readonly target: string;
  readonly #client: grpc.Client;
  readonly #metadata: grpc.Metadata;

  constructor(endpoint: string, headers: [string, string][]) {
    const u = new URL(endpoint);
    const tls = u.protocol === "https:";
    this.target = endpoint;
    const address = `${u.hostname}:${u.port || (tls ? 443 : 80)}`;
    this.#client = new grpc.Client(
      address,
      tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure(),
      {
        "grpc.enable_retries": 0,
        "grpc.enable_http_proxy": 0,
        "grpc.service_config_disable_resolution": 1,
        "grpc.use_local_subchannel_pool": 1,
        "grpc.initial_reconnect_backoff_ms": 500,
        "grpc.max_reconnect_backoff_ms": 5000,
      },
    );
    this.#metadata = new grpc.Metadata();
    for (const [k, v] of headers) this.#metadata.add(k.toLowerCase(), v);
  }

  send(body: Uint8Array<ArrayBuffer>, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        EXPORT,
        (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
        (b: Buffer) => b,
        body,
        this.#metadata,
        { deadline: Date.now() + timeoutMs },
        (err) => err ? reject(new Error(`collector: ${err.message}`)) : resolve(),
      );
    });
  }

  close(): void {
    this.#client.close();
  }
}
