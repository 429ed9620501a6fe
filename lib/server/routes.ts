/**
 * The main port's route table and request entry: match method and path, check the API key on
 * protected routes (401, empty body, as SMG), attach the request id, count SMG's `smg_http_*`
 * metrics. Unknown paths get SMG's empty 404; a known path with another method gets 405.
 */

import type { Clock } from "../core/clock.ts";
import type { Endpoint } from "../core/types.ts";
import type { CounterSeries, HistogramSeries } from "../metrics/fast.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { RequestContext } from "../proxy/proxy.ts";
import { requestIdFor } from "./request_id.ts";

/** What a handler gets besides the request. */
export interface RouteContext extends RequestContext {
  /** The request path (no query). */
  path: string;
}

/** A route handler. */
export type Handler = (req: Request, ctx: RouteContext) => Response | Promise<Response>;

/** One route. */
export interface Route {
  /** HTTP method. */
  method: "GET" | "POST" | "DELETE";
  /** Exact path, or a prefix ending in `/` (the handler reads the rest from `ctx.path`). */
  path: string;
  /** Whether `--api-key` is required. */
  protected: boolean;
  /** The handler sets `x-request-id` on every response itself (default false). */
  stampsRequestId?: boolean;
  /** The handler. */
  handler: Handler;
}

/** Inference paths and their endpoint. */
export const INFERENCE_PATHS: Record<string, Endpoint> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/generate": "generate",
  "/v1/embeddings": "embeddings",
  "/v1/rerank": "rerank",
};

/** Metric series of one method and path template, resolved once. */
interface PathSeries {
  requests: CounterSeries;
  duration: HistogramSeries;
  responses: Map<string | number, CounterSeries>;
}

/** What the entry needs. */
export interface EntryDeps {
  /** The routes. */
  routes: Route[];
  /** `--api-key`, or null. */
  apiKey: string | null;
  /** Request id headers. */
  requestIdHeaders: readonly string[];
  /** Metrics. */
  metrics: Metrics;
  /** Clock. */
  clock: Clock;
}

/** The path of an absolute request URL, without parsing the whole URL. */
function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return q < 0 ? url.slice(start) : url.slice(start, q);
}

/** Builds `(req, completed) => Response` for the main port. */
export function createEntry(
  d: EntryDeps,
): (req: Request, completed: Promise<unknown>) => Promise<Response> {
  const exact = new Map<string, Route[]>();
  const prefixes: Route[] = [];
  for (const r of d.routes) {
    if (r.path.endsWith("/")) prefixes.push(r);
    else exact.set(r.path, [...(exact.get(r.path) ?? []), r]);
  }
  const bearer = d.apiKey === null ? null : `Bearer ${d.apiKey}`;
  const active = d.metrics.httpActive.with();
  const bySeries = new Map<string, PathSeries>();
  const seriesFor = (method: string, template: string): PathSeries => {
    const key = `${method} ${template}`;
    let s = bySeries.get(key);
    if (!s) {
      s = {
        requests: d.metrics.httpRequests.with(method, template),
        duration: d.metrics.httpDuration.with(method, template),
        responses: new Map(),
      };
      if (bySeries.size > 1024) bySeries.clear(); // odd methods must not grow it without end
      bySeries.set(key, s);
    }
    return s;
  };
  const done = () => active.dec();

  return async (req, completed) => {
    const start = d.clock.now();
    const path = pathOf(req.url);
    let candidates = exact.get(path);
    let template = path;
    if (!candidates) {
      const p = prefixes.filter((r) => path.startsWith(r.path) && path.length > r.path.length);
      if (p.length > 0) {
        candidates = p;
        template = p[0].path + "{id}";
      }
    }
    const route = candidates?.find((r) => r.method === req.method);
    const requestId = requestIdFor(req.headers, d.requestIdHeaders, path);
    active.inc();
    completed.then(done, done);

    let res: Response;
    if (!candidates) {
      template = "other";
      res = new Response(null, { status: 404 });
    } else if (!route) {
      res = new Response(null, {
        status: 405,
        headers: { allow: candidates.map((r) => r.method).join(", ") },
      });
    } else if (route.protected && bearer !== null && req.headers.get("authorization") !== bearer) {
      res = new Response(null, { status: 401 });
    } else {
      res = await route.handler(req, { requestId, completed, path });
    }
    // The proxy stamps its own responses; touching `res.headers` costs a Headers object.
    if (!route?.stampsRequestId) res.headers.set("x-request-id", requestId);
    const s = seriesFor(req.method, template);
    s.requests.inc();
    const code = res.status < 400 ? "" : res.headers.get("x-smg-error-code") ?? "";
    const rkey = code ? `${res.status} ${code}` : res.status;
    let responses = s.responses.get(rkey);
    if (!responses) {
      responses = d.metrics.httpResponses.with(template, String(res.status), code);
      s.responses.set(rkey, responses);
    }
    responses.inc();
    s.duration.observe((d.clock.now() - start) / 1000);
    return res;
  };
}
