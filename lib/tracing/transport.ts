/**
 * How an encoded batch reaches the collector: OTLP/HTTP (`POST` of the protobuf bytes to the
 * `/v1/traces` URL, `application/x-protobuf`) over `fetch`, or OTLP/gRPC (the unary
 * `opentelemetry.proto.collector.trace.v1.TraceService/Export`) over grpc-js, imported only when
 * asked (`grpc_transport.ts`). Either rejects on any failure, a non-2xx status, a gRPC status
 * other than OK, or no answer within its bound.
 */

import type { Transport } from "./export.ts";
import type { TracingSettings } from "./settings.ts";

/** OTLP/HTTP with protobuf bodies. */
export class HttpTransport implements Transport {
  readonly target: string;
  readonly #headers: [string, string][];
  readonly #client: Deno.HttpClient;

  constructor(url: string, headers: [string, string][]) {
    this.target = url;
    this.#headers = [["content-type", "application/x-protobuf"], ...headers];
    this.#client = Deno.createHttpClient({});
  }

  async send(body: Uint8Array<ArrayBuffer>, timeoutMs: number): Promise<void> {
    const res = await fetch(this.target, {
      method: "POST",
      headers: this.#headers,
      body,
      signal: AbortSignal.timeout(timeoutMs),
      client: this.#client,
    });
    await res.body?.cancel();
    if (res.status < 200 || res.status > 299) {
      throw new Error(`collector answered ${res.status}`);
    }
  }

  close(): void {
    this.#client.close();
  }
}

/** The transport `s` names (gRPC's module imported with the first batch). */
export function transportFor(s: TracingSettings): Transport {
  if (s.protocol === "http/protobuf") return new HttpTransport(s.endpoint, s.headers);
  let grpc: Promise<Transport> | null = null;
  let closed = false;
  const ready = () =>
    grpc ??= import("./grpc_transport.ts").then((m) => new m.GrpcTransport(s.endpoint, s.headers));
  return {
    target: s.endpoint,
    send: async (body, timeoutMs) => await (await ready()).send(body, timeoutMs),
    close() {
      if (closed) return;
      closed = true;
      void grpc?.then((t) => t.close());
    },
  };
}
