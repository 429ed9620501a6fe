/**
 * A collector that only listens, for `bench:cost`'s tracing variants: OTLP/HTTP (`POST
 * /v1/traces`, answered 200 with an empty `ExportTraceServiceResponse`) on `--port` and OTLP/gRPC
 * (`TraceService/Export`, answered OK) on `--grpc-port`, the bodies counted and dropped (decoding
 * is the collector's cost, not the gateway's). `GET /health` says how many exports came.
 *
 *   deno run --allow-net=127.0.0.1 --allow-env bench/operator/otlp_sink.ts --port N --grpc-port M
 */

import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  args: Deno.args,
  options: { port: { type: "string" }, "grpc-port": { type: "string" } },
});
let exports = 0;
let bytes = 0;
const take = (n: number) => {
  exports++;
  bytes += n;
};
Deno.serve({ hostname: "127.0.0.1", port: Number(values.port), onListen: () => {} }, async (r) => {
  const path = new URL(r.url).pathname;
  if (path === "/health") return new Response(`${exports} exports, ${bytes} bytes\n`);
  if (r.method !== "POST" || path !== "/v1/traces") return new Response(null, { status: 404 });
  take((await r.arrayBuffer()).byteLength);
  return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
});
const server = new grpc.Server();
const raw = (b: Buffer) => b;
server.addService({
  Export: {
    path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
}, {
  Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
    take(call.request.byteLength);
    cb(null, Buffer.alloc(0));
  },
});
server.bindAsync(
  `127.0.0.1:${values["grpc-port"]}`,
  grpc.ServerCredentials.createInsecure(),
  (e) => {
    if (e) throw e;
  },
);
