/**
 * The main port's route table and request entry: match method and path, check the API key on
 * protected routes (401, empty body, as SMG), resolve an inference request's tenant, attach the
 * request id, count SMG's `smg_http_*` metrics. Unknown paths get SMG's empty 404; a known path
 * with another method gets 405. Keys as SMG: with `--api-key` or `--tenant-api-key` configured,
 * inference routes take any of them; the other protected routes take only `--api-key` (none
 * when only tenant keys are configured).
 */

import type { Clock } from "../core/clock.ts";
import type { CounterSeries, HistogramSeries } from "../metrics/fast.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { errorReply, GatewayError } from "../core/errors.ts";
import { type Inbound, type Reply, replyHeader } from "../core/http.ts";
import type { Tenants } from "../limits/tenants.ts";
import type { RequestContext } from "../proxy/proxy.ts";
import { fromResponse } from "./inbound.ts";
import { requestIdFor } from "./request_id.ts";

/** What a handler gets besides the request. */
export interface RouteContext extends RequestContext {
  /** The request path (no query). */
  path: string;
}

/** A route handler over fetch's `Request` and `Response`. */
export type Handler = (req: Request, ctx: RouteContext) => Response | Promise<Response>;

/** A route handler over the gateway's own exchange types (the inference routes). */
export type InboundHandler = (inb: Inbound, ctx: RouteContext) => Promise<Reply>;

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
  /** The handler: `handler`, or `inbound` on the inference routes. */
  handler?: Handler;
  /** A handler that reads the `Inbound` and answers a `Reply` (no `Request` is built). */
  inbound?: InboundHandler;
}

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
  /** Client keys and tenant resolution. */
  tenants: Tenants;
  /** Whether inference requests need their tenant resolved (tenant limits on). */
  resolveTenants: boolean;
  /** Request id headers. */
  requestIdHeaders: readonly string[];
  /** Metrics. */
  metrics: Metrics;
  /** Clock. */
  clock: Clock;
}

/** The main port's entry: a request and a promise settled when its response is done. */
export type Entry = (inb: Inbound, completed: Promise<unknown>) => Promise<Reply>;

const empty = (status: number, headers: [string, string][] = []): Reply => ({
  status,
  headers,
  body: null,
});

/** Builds the main port's `Entry`. */
export function createEntry(d: EntryDeps): Entry {
  const exact = new Map<string, Route[]>();
  const prefixes: Route[] = [];
  for (const r of d.routes) {
    if (r.path.endsWith("/")) prefixes.push(r);
    else exact.set(r.path, [...(exact.get(r.path) ?? []), r]);
  }
  const tenants = d.tenants;
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

  return async (inb, completed) => {
    const start = d.clock.now();
    const path = inb.path;
    const method = inb.method;
    let candidates = exact.get(path);
    let template = path;
    if (!candidates) {
      const p = prefixes.filter((r) => path.startsWith(r.path) && path.length > r.path.length);
      if (p.length > 0) {
        candidates = p;
        template = p[0].path + "{id}";
      }
    }
    const route = candidates?.find((r) => r.method === method);
    const requestId = requestIdFor(inb.headers, d.requestIdHeaders, path);
    active.inc();
    completed.then(done, done);

    let res: Reply;
    let auth: string | null = null;
    if (!candidates) {
      template = "other";
      res = empty(404);
    } else if (!route) {
      res = empty(405, [["allow", candidates.map((r) => r.method).join(", ")]]);
    } else if (
      route.protected && tenants.keysRequired &&
      (route.inbound
        ? (auth = tenants.authenticate(inb.headers.get("authorization"))) === null
        : !tenants.isSharedKey(inb.headers.get("authorization")))
    ) {
      res = empty(401);
    } else {
      const rc: RouteContext = { requestId, completed, path };
      if (route.protected && d.resolveTenants) {
        rc.tenant = tenants.resolve(inb.headers, inb.remote, auth);
      }
      if (route.inbound) res = await route.inbound(inb, rc);
      else {
        const req = await requestOf(inb);
        res = req instanceof GatewayError
          ? errorReply(req, requestId)
          : await fromResponse(await route.handler!(req, rc));
      }
    }
    if (!route?.stampsRequestId) stamp(res.headers, requestId);
    const s = seriesFor(method, template);
    s.requests.inc();
    const code = res.status < 400 ? "" : replyHeader(res.headers, "x-smg-error-code") ?? "";
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

/** The fetch `Request` of `inb`, or the error its body came to (413 too large, 400 broken). */
async function requestOf(inb: Inbound): Promise<Request | GatewayError> {
  try {
    return await inb.request();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
}

/** Sets `x-request-id` on a reply, replacing a handler's own. */
function stamp(h: [string, string][], requestId: string): void {
  for (let i = 0; i < h.length; i++) {
    if (h[i][0] === "x-request-id") {
      h[i] = ["x-request-id", requestId];
      return;
    }
  }
  h.push(["x-request-id", requestId]);
}
