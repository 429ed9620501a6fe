/**
 * Header handling between client and worker: which request headers reach the worker (all but
 * hop-by-hop, length and encoding ones; the worker's own key replaces the client's bearer), and
 * which worker headers reach the client (the same minus hop-by-hop, plus the request id and the
 * routed worker id). The client never asks workers for compression (`accept-encoding` is
 * dropped); should a worker compress anyway, its bytes and `content-encoding` pass through
 * together. Lists of pairs, not `Headers` objects: `Response` converts either, and building a
 * `Headers` first costs a second conversion.
 */

import type { HeaderMap } from "../../core/http.ts";
import type { HeaderList } from "../../upstream/types.ts";
import type { LegTrace } from "../types.ts";

export type { HeaderList };

const DROP_REQUEST = new Set([
  "host",
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "expect",
  "accept-encoding",
  "proxy-authorization",
  "proxy-connection",
  "x-request-id",
]);

const DROP_RESPONSE = new Set([
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "trailer",
  "upgrade",
  "date",
  "server",
  "x-request-id",
]);

/**
 * Headers for the worker request; with `trace` (tracing on), the attempt's `traceparent` and
 * `tracestate` replace the client's.
 */
export function upstreamHeaders(
  client: HeaderMap,
  requestId: string,
  workerKey: string | null,
  trace: LegTrace | null = null,
): HeaderList {
  const h: HeaderList = [["x-request-id", requestId]];
  let type = false;
  for (const [k, v] of client) {
    if (DROP_REQUEST.has(k)) continue;
    if (k === "authorization" && workerKey) continue;
    if (trace && (k === "traceparent" || k === "tracestate")) continue;
    if (k === "content-type") type = true;
    h.push([k, v]);
  }
  if (trace) {
    h.push(["traceparent", trace.traceparent]);
    if (trace.tracestate !== null) h.push(["tracestate", trace.tracestate]);
  }
  if (workerKey) h.push(["authorization", `Bearer ${workerKey}`]);
  if (!type) h.push(["content-type", "application/json"]);
  return h;
}

/** Headers for the client response. */
export function clientHeaders(
  worker: HeaderList,
  requestId: string,
  workerId: string,
  stream: boolean,
): HeaderList {
  const h: HeaderList = [["x-request-id", requestId], ["x-smg-routed-worker-id", workerId]];
  for (let i = 0; i < worker.length; i++) {
    const k = worker[i][0];
    if (DROP_RESPONSE.has(k) || (stream && (k === "content-type" || k === "cache-control"))) {
      continue;
    }
    h.push(worker[i]);
  }
  if (stream) h.push(["content-type", "text/event-stream"], ["cache-control", "no-cache"]);
  return h;
}

/**
 * Why a worker's 2xx answer to a streamed request cannot be relayed as a stream, or null when it
 * can: its `content-type` is not `text/event-stream` (a whole JSON answer, say), or it carries a
 * `content-encoding` (the gateway never asks for one, and relays events, not compressed bytes).
 */
export function notAnEventStream(worker: HeaderList): string | null {
  let type: string | null = null;
  for (const [k, v] of worker) {
    if (k === "content-type") type = v;
    else if (k === "content-encoding" && v.trim().toLowerCase() !== "identity") {
      return `content-encoding ${v}, not an event stream the gateway can relay`;
    }
  }
  if (type === null) return "no content-type, not text/event-stream";
  const media = type.split(";", 1)[0].trim().toLowerCase();
  return media === "text/event-stream" ? null : `content-type ${type}, not text/event-stream`;
}

/**
 * The most a worker's response headers may weigh (names, values and their `: ` and CRLF) to be
 * relayed: under the 16 KiB head that Node's HTTP client accepts by default, with room for the
 * gateway's own. Engines send a few hundred bytes.
 */
export const MAX_RELAYED_HEAD_BYTES = 8 * 1024;

/** Why the worker's head is too large to relay (over `MAX_RELAYED_HEAD_BYTES`), or null. */
export function headOverBound(worker: HeaderList): string | null {
  let bytes = 0;
  for (let i = 0; i < worker.length; i++) bytes += worker[i][0].length + worker[i][1].length + 4;
  if (bytes <= MAX_RELAYED_HEAD_BYTES) return null;
  return `${worker.length} headers of ${bytes} bytes, over the ${MAX_RELAYED_HEAD_BYTES} relayed`;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "trailer", "upgrade"]);

/** Headers for a worker's error response passed through as the request's answer. */
export function passThroughHeaders(worker: HeaderList, requestId: string): HeaderList {
  const h: HeaderList = [["x-request-id", requestId]];
  for (const pair of worker) {
    const k = pair[0];
    if (k !== "content-length" && k !== "transfer-encoding" && k !== "x-request-id") {
      if (!HOP_BY_HOP.has(k)) h.push(pair);
    }
  }
  return h;
}
