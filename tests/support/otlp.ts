/**
 * OTLP as a collector reads it, for tests: `ExportTraceServiceRequest` bytes decoded with
 * OpenTelemetry's own protocol definitions (the protobufjs module generated from
 * opentelemetry-proto that `@opentelemetry/otlp-transformer` 0.57 ships), not with the gateway's
 * encoder; a transport that keeps what it is sent; and a receiver on loopback speaking OTLP/HTTP
 * and OTLP/gRPC, as a collector does.
 */

import root from "@opentelemetry/otlp-transformer/build/src/generated/root.js";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import type { Transport } from "../../lib/tracing/export.ts";
import { within } from "../../support/wait.ts";

// deno-lint-ignore no-explicit-any
const proto = (root as any).opentelemetry.proto;
const REQUEST = proto.collector.trace.v1.ExportTraceServiceRequest;
const RESPONSE = proto.collector.trace.v1.ExportTraceServiceResponse;

/** A span as decoded. */
export interface DecodedSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  /** Hex, or "" for a root. */
  parentSpanId: string;
  traceState: string;
  /** Start and end, ms since the epoch. */
  start: number;
  end: number;
  attributes: Record<string, unknown>;
  events: { name: string; time: number; attributes: Record<string, unknown> }[];
  status: { code: number; message: string };
  /** The resource's attributes. */
  resource: Record<string, unknown>;
  /** The instrumentation scope. */
  scope: { name: string; version: string };
}

const hex = (b: Uint8Array | undefined) =>
  b ? [...b].map((x) => x.toString(16).padStart(2, "0")).join("") : "";

// deno-lint-ignore no-explicit-any
function value(v: any): unknown {
  if (v === null || v === undefined) return undefined;
  if (v.stringValue !== undefined && v.stringValue !== null && v.value === "stringValue") {
    return v.stringValue;
  }
  switch (v.value) {
    case "stringValue":
      return v.stringValue;
    case "boolValue":
      return v.boolValue;
    case "intValue":
      return Number(v.intValue);
    case "doubleValue":
      return v.doubleValue;
    default:
      return undefined;
  }
}

// deno-lint-ignore no-explicit-any
const attrs = (list: any[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, value(kv.value)]));

// deno-lint-ignore no-explicit-any
const ms = (nanos: any) => Number(BigInt(nanos.toString())) / 1e6;

/** Every span of an encoded `ExportTraceServiceRequest`. */
export function decodeSpans(bytes: Uint8Array): DecodedSpan[] {
  const req = REQUEST.decode(bytes);
  const out: DecodedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      const scope = { name: ss.scope?.name ?? "", version: ss.scope?.version ?? "" };
      for (const s of ss.spans ?? []) {
        out.push({
          name: s.name,
          kind: s.kind,
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          traceState: s.traceState ?? "",
          start: ms(s.startTimeUnixNano),
          end: ms(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          // deno-lint-ignore no-explicit-any
          events: (s.events ?? []).map((e: any) => ({
            name: e.name,
            time: ms(e.timeUnixNano),
            attributes: attrs(e.attributes),
          })),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
          resource,
          scope,
        });
      }
    }
  }
  return out;
}

/**
 * A transport that keeps each batch it is handed, decoded, then passes it to `inner` (a real
 * transport, whose answer is its own) if given; `fail` makes its sends reject.
 */
export class CapturingTransport implements Transport {
  readonly target: string;
  readonly spans: DecodedSpan[] = [];
  batches = 0;
  fail: Error | null = null;
  closed = false;
  readonly #waiters = new Set<() => void>();
  readonly #inner: Transport | null;

  constructor(inner: Transport | null = null) {
    this.#inner = inner;
    this.target = inner?.target ?? "capture";
  }

  send(body: Uint8Array<ArrayBuffer>, timeoutMs: number): Promise<void> {
    if (this.fail) return Promise.reject(this.fail);
    this.batches++;
    this.spans.push(...decodeSpans(body));
    for (const w of this.#waiters) w();
    return this.#inner ? this.#inner.send(body, timeoutMs) : Promise.resolve();
  }

  close(): void {
    this.closed = true;
    this.#inner?.close();
  }

  /** Resolves once `pred` holds over the spans received; fails after 10 s. */
  until(pred: (spans: DecodedSpan[]) => boolean): Promise<DecodedSpan[]> {
    if (pred(this.spans)) return Promise.resolve(this.spans);
    return within(
      new Promise((resolve) => {
        const w = () => {
          if (!pred(this.spans)) return;
          this.#waiters.delete(w);
          resolve(this.spans);
        };
        this.#waiters.add(w);
      }),
      "the spans expected",
    );
  }
}

/** A collector on loopback: OTLP/HTTP at `/v1/traces` and OTLP/gRPC, both decoding. */
export class OtlpReceiver {
  readonly spans: DecodedSpan[] = [];
  /** Headers (HTTP) or metadata (gRPC) of the last export. */
  lastHeaders: Record<string, string> = {};
  readonly #http: Deno.HttpServer<Deno.NetAddr>;
  readonly #grpc = new grpc.Server();
  grpcPort = 0;
  readonly #waiters = new Set<() => void>();

  constructor() {
    this.#http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      if (new URL(req.url).pathname !== "/v1/traces") return new Response(null, { status: 404 });
      this.lastHeaders = Object.fromEntries(req.headers);
      this.#take(new Uint8Array(await req.arrayBuffer()));
      return new Response(RESPONSE.encode({}).finish(), {
        headers: { "content-type": "application/x-protobuf" },
      });
    });
    this.#grpc.addService({
      Export: {
        path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        requestStream: false,
        responseStream: false,
        requestSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: (b: Buffer) => b,
        responseDeserialize: (b: Buffer) => b,
      },
    }, {
      Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        this.lastHeaders = Object.fromEntries(
          Object.entries(call.metadata.getMap()).map(([k, v]) => [k, String(v)]),
        );
        this.#take(new Uint8Array(call.request));
        cb(null, Buffer.from(RESPONSE.encode({}).finish()));
      },
    });
  }

  /** Starts the gRPC side; resolves with both URLs. */
  async start(): Promise<{ http: string; grpc: string }> {
    this.grpcPort = await new Promise<number>((resolve, reject) =>
      this.#grpc.bindAsync(
        "127.0.0.1:0",
        grpc.ServerCredentials.createInsecure(),
        (e, port) => e ? reject(e) : resolve(port),
      )
    );
    return {
      http: `http://127.0.0.1:${this.#http.addr.port}/v1/traces`,
      grpc: `http://127.0.0.1:${this.grpcPort}`,
    };
  }

  #take(body: Uint8Array): void {
    this.spans.push(...decodeSpans(body));
    for (const w of this.#waiters) w();
  }

  /** Resolves once `n` spans arrived; fails after 10 s. */
  until(n: number): Promise<DecodedSpan[]> {
    if (this.spans.length >= n) return Promise.resolve(this.spans);
    return within(
      new Promise((resolve) => {
        const w = () => {
          if (this.spans.length < n) return;
          this.#waiters.delete(w);
          resolve(this.spans);
        };
        this.#waiters.add(w);
      }),
      `${n} spans at the receiver`,
    );
  }

  /** Stops both sides. */
  async close(): Promise<void> {
    await this.#http.shutdown();
    await new Promise<void>((resolve) => this.#grpc.tryShutdown(() => resolve()));
  }
}
