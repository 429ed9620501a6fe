/**
 * The main port's route table and request entry, a pipeline of named stages: CORS preflights
 * answered and CORS headers added (`cors.ts`, outermost, as SMG); match (method and path);
 * authorize (the keys of protected routes, `auth.ts`: 401/403 in the error envelope, with
 * `www-authenticate`); dispatch (an inference request's tenant resolved, the handler called);
 * the request id stamped; audit (control-plane use, when control-plane keys are configured);
 * count (SMG's `smg_http_*` metrics). Unknown paths get SMG's empty 404; a
 * known path with another method gets 405. Keys as SMG: with `--api-key` or `--tenant-api-key`
 * configured, inference routes take any of them; control-plane routes take the control-plane
 * keys, else `--api-key`, and refuse every request when only tenant keys are configured.
 */

import type { Clock } from "../core/clock.ts";
import type { CounterSeries, HistogramSeries } from "../metrics/fast.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { ControlPlaneKey } from "../config/config.ts";
import { errorReply, GatewayError } from "../core/errors.ts";
import { type Inbound, type Reply, replyHeader } from "../core/http.ts";
import { type Logger, silentLogger } from "../core/log.ts";
import { createAccess } from "./auth.ts";
import { createCors } from "./cors.ts";
import type { Tenants } from "../limits/tenants.ts";
import type { RequestContext } from "../proxy/proxy.ts";
import { fromResponse } from "./inbound.ts";
import { requestIdFor } from "./request_id.ts";
import type { RequestTrace, Span, Tracer } from "../tracing/span.ts";
import { attributeBlock } from "../tracing/otlp.ts";
import type { SlowRequests } from "../dashboard/slow.ts";

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
  /** Whether a key is required: `--api-key`, or the control-plane keys on `controlPlane` routes. */
  protected: boolean;
  /** A control-plane route (workers, loads, cache, mesh): its keys are the control plane's. */
  controlPlane?: boolean;
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
  /** `--api-key`, or null. */
  apiKey: string | null;
  /** `--control-plane-api-keys` (default none). */
  controlPlaneApiKeys?: readonly ControlPlaneKey[];
  /** `--cors-allowed-origins`, normalised (default none: any origin). */
  corsAllowedOrigins?: readonly string[];
  /** Where control-plane use is logged (module `audit`; default silent). */
  log?: Logger;
  /** Client keys (`--api-key`, `--tenant-api-key`) and tenant resolution. */
  tenants: Tenants;
  /** Whether inference requests need their tenant resolved (tenant limits on). */
  resolveTenants: boolean;
  /** Request id headers. */
  requestIdHeaders: readonly string[];
  /** Metrics. */
  metrics: Metrics;
  /** Clock. */
  clock: Clock;
  /** Starts each inference request's trace (`--enable-trace`; default none). */
  tracer?: Tracer | null;
  /** The status page's slow requests, told of each traced one once its response is done. */
  slow?: SlowRequests | null;
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
  const access = createAccess(d.apiKey, d.controlPlaneApiKeys ?? []);
  const tenants = d.tenants;
  const clientOpen = !tenants.keysRequired;
  const controlOpen = clientOpen && !access.controlPlaneKeys;
  const cors = createCors(d.corsAllowedOrigins ?? []);
  const audit = (d.log ?? silentLogger).child({ module: "audit" });
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

  /** Stage 1, match: the route of `method` at `path`, the routes at that path, the template. */
  const match = (method: string, path: string): Match => {
    let candidates = exact.get(path);
    let template = path;
    if (!candidates) {
      const p = prefixes.filter((r) => path.startsWith(r.path) && path.length > r.path.length);
      if (p.length > 0) {
        candidates = p;
        template = p[0].path + "{id}";
      }
    }
    return { route: candidates?.find((r) => r.method === method), candidates, template };
  };

  /** Stage 2, authorize: who the key is, or why the route refuses it. */
  const authorize = (inb: Inbound, m: Match): Verdict => {
    const route = m.route;
    const control = route?.controlPlane === true;
    const v: Verdict = { control, denied: null, keyId: null, auth: null };
    if (!route?.protected || (control ? controlOpen : clientOpen)) return v;
    const header = inb.headers.get("authorization");
    if (!control) {
      v.auth = tenants.authenticate(header);
      if (v.auth === null) v.denied = clientRefusal(header);
    } else if (!access.controlPlaneKeys && d.apiKey === null) {
      v.denied = new GatewayError(
        401,
        "unauthorized",
        "control-plane routes are closed when only tenant keys are configured; set --api-key or --control-plane-api-keys",
      );
    } else {
      const c = access.check("control", inb.method, m.template, header);
      v.denied = c.error;
      v.keyId = c.keyId;
    }
    return v;
  };

  /** Stage 3, dispatch: the answer (404, 405, the refusal, or the handler's, with the tenant). */
  const dispatch = async (
    inb: Inbound,
    m: Match,
    v: Verdict,
    rc: RouteContext,
  ): Promise<Reply> => {
    const route = m.route;
    if (!m.candidates) return empty(404);
    if (!route) return empty(405, [["allow", m.candidates.map((r) => r.method).join(", ")]]);
    if (v.denied !== null) {
      const res = errorReply(v.denied, rc.requestId);
      if (v.denied.status === 401) {
        const realm = v.control ? "control-plane" : "smg";
        res.headers.push(["www-authenticate", `Bearer realm="${realm}"`]);
      }
      return res;
    }
    if (route.protected && d.resolveTenants) {
      rc.tenant = tenants.resolve(inb.headers, inb.remote, v.auth);
    }
    if (route.inbound) return await route.inbound(inb, rc);
    const req = await requestOf(inb);
    return req instanceof GatewayError
      ? errorReply(req, rc.requestId)
      : await fromResponse(await route.handler!(req, rc));
  };

  /** Stage 4, audit: control-plane use, when control-plane keys are configured. */
  const auditOf = (inb: Inbound, v: Verdict, res: Reply, requestId: string): void => {
    if (!v.control || !access.controlPlaneKeys) return;
    const method = inb.method;
    const fields = {
      key: v.keyId,
      method,
      path: inb.path,
      status: res.status,
      request_id: requestId,
    };
    if (v.denied !== null) audit.warn("control-plane request refused", fields);
    else if (method === "GET") audit.debug("control-plane request", fields);
    else audit.info("control-plane request", fields);
  };

  /** Stage 5, count: SMG's `smg_http_*` series of the route's template. */
  const count = (method: string, template: string, res: Reply, start: number): void => {
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
  };

  /**
   * Each traced route's server span name (`METHOD /path`) and its constant attributes, encoded
   * once: traced routes are the inference routes, exact paths.
   */
  const traced = new Map<Route, { name: string; block: Uint8Array }>();
  const tracedRoute = (route: Route, template: string) => {
    let t = traced.get(route);
    if (t === undefined) {
      t = {
        name: `${route.method} ${template}`,
        block: attributeBlock([
          "http.request.method",
          route.method,
          "url.path",
          template,
          "http.route",
          template,
        ]),
      };
      traced.set(route, t);
    }
    return t;
  };

  /** An inference request's trace, its server span's first attributes set. */
  const traceOf = (inb: Inbound, m: Match, requestId: string): RequestTrace | undefined => {
    const tracer = d.tracer;
    if (!tracer || !m.route?.inbound) return undefined;
    const h = inb.headers;
    const r = tracedRoute(m.route, m.template);
    const t = tracer.request(r.name, h.get("traceparent"), h.get("tracestate"));
    t.server?.block(r.block)
      .set("client.address", inb.remote)
      .set("smg.request_id", requestId);
    return t;
  };

  /**
   * Ends a sampled request's trace once its response is done: its server span, and its place
   * among the status page's slow requests (the entry made only when it would be listed). An
   * unsampled request has nothing to end.
   */
  const endTrace = (
    t: RequestTrace,
    server: Span,
    route: string,
    requestId: string,
    res: Reply,
    start: number,
  ) => {
    const status = res.status;
    server.set("http.response.status_code", status);
    if (status >= 500) server.set("error.type", String(status)).fail(`answered ${status}`);
    return () => {
      server.finish();
      const slow = d.slow;
      if (!slow) return;
      const now = d.clock.now();
      const ms = now - start;
      if (!slow.wouldKeep(ms, now)) return;
      slow.add({ traceId: t.traceId, requestId, route, status, ms }, now);
    };
  };

  return async (inb, completed) => {
    const method = inb.method;
    // SMG's CORS layer answers every OPTIONS itself, outside routing, auth and metrics.
    if (method === "OPTIONS") return cors.preflight(inb.headers);
    const start = d.clock.now();
    const m = match(method, inb.path);
    const requestId = requestIdFor(inb.headers, d.requestIdHeaders, inb.path);
    active.inc();
    completed.then(done, done);
    const v = authorize(inb, m);
    const trace = traceOf(inb, m, requestId);
    const rc: RouteContext = { requestId, completed, path: inb.path, trace };
    const res = await dispatch(inb, m, v, rc);
    const server = trace?.server;
    if (server) {
      server.set("smg.tenant", rc.tenant);
      const name = tracedRoute(m.route!, m.template).name;
      const end = endTrace(trace!, server, name, requestId, res, start);
      completed.then(end, end);
    }
    if (!m.route?.stampsRequestId) stamp(res.headers, requestId);
    cors.decorate(res.headers, inb.headers.get("origin"));
    auditOf(inb, v, res, requestId);
    count(method, m.candidates ? m.template : "other", res, start);
    return res;
  };
}

/** What the path and method matched. */
interface Match {
  /** The route of the method, if any. */
  route: Route | undefined;
  /** The routes at the path, if any (none: 404; no route of the method: 405). */
  candidates: Route[] | undefined;
  /** The path as the metrics name it (`/workers/{id}`). */
  template: string;
}

/** What the keys came to. */
interface Verdict {
  /** A control-plane route. */
  control: boolean;
  /** Why the request is refused, or null. */
  denied: GatewayError | null;
  /** The control-plane key's id, when one was checked. */
  keyId: string | null;
  /** The client key's tenant id, when one was checked. */
  auth: string | null;
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

/** Why a protected client route refuses `authorization` (missing or unknown key). */
function clientRefusal(authorization: string | null): GatewayError {
  const missing = authorization === null || !authorization.startsWith("Bearer ");
  return new GatewayError(
    401,
    "unauthorized",
    missing ? "missing API key: send 'Authorization: Bearer <key>'" : "invalid API key",
  );
}
