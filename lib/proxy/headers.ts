/**
 * Header handling between client and worker: which request headers reach the worker (all but
 * hop-by-hop, length and encoding ones; the worker's own key replaces the client's bearer), and
 * which worker headers reach the client (the same minus hop-by-hop, plus the request id and the
 * routed worker id). `fetch` decodes compressed worker bodies, so encoding and length headers
 * never pass through. Lists of pairs, not `Headers` objects: `fetch` and `Response` convert
 * either, and building a `Headers` first costs a second conversion.
 */

/** Header name/value pairs. */
export type HeaderList = [string, string][];

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
  "content-encoding",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "trailer",
  "upgrade",
  "date",
  "server",
  "x-request-id",
]);

/** Headers for the worker request. */
export function upstreamHeaders(
  client: Headers,
  requestId: string,
  workerKey: string | null,
): HeaderList {
  const h: HeaderList = [["x-request-id", requestId]];
  let type = false;
  for (const [k, v] of client) {
    if (DROP_REQUEST.has(k)) continue;
    if (k === "authorization" && workerKey) continue;
    if (k === "content-type") type = true;
    h.push([k, v]);
  }
  if (workerKey) h.push(["authorization", `Bearer ${workerKey}`]);
  if (!type) h.push(["content-type", "application/json"]);
  return h;
}

/** Headers for the client response. */
export function clientHeaders(
  worker: Headers,
  requestId: string,
  workerId: string,
  stream: boolean,
): HeaderList {
  const h: HeaderList = [["x-request-id", requestId], ["x-smg-routed-worker-id", workerId]];
  for (const [k, v] of worker) {
    if (DROP_RESPONSE.has(k) || (stream && (k === "content-type" || k === "cache-control"))) {
      continue;
    }
    h.push([k, v]);
  }
  if (stream) h.push(["content-type", "text/event-stream"], ["cache-control", "no-cache"]);
  return h;
}
