/**
 * Header handling between client and worker: which request headers reach the worker (all but
 * hop-by-hop, length and encoding ones; the worker's own key replaces the client's bearer), and
 * which worker headers reach the client (the same minus hop-by-hop, plus the request id and the
 * routed worker id). `fetch` decodes compressed worker bodies, so encoding and length headers
 * never pass through.
 */

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
]);

/** Headers for the worker request. */
export function upstreamHeaders(
  client: Headers,
  requestId: string,
  workerKey: string | null,
): Headers {
  const h = new Headers();
  for (const [k, v] of client) {
    if (!DROP_REQUEST.has(k)) h.set(k, v);
  }
  h.set("x-request-id", requestId);
  if (workerKey) h.set("authorization", `Bearer ${workerKey}`);
  if (!h.has("content-type")) h.set("content-type", "application/json");
  return h;
}

/** Headers for the client response. */
export function clientHeaders(
  worker: Headers,
  requestId: string,
  workerId: string,
  stream: boolean,
): Headers {
  const h = new Headers();
  for (const [k, v] of worker) {
    if (!DROP_RESPONSE.has(k)) h.set(k, v);
  }
  h.set("x-request-id", requestId);
  h.set("x-smg-routed-worker-id", workerId);
  if (stream) {
    h.set("content-type", "text/event-stream");
    h.set("cache-control", "no-cache");
  }
  return h;
}
