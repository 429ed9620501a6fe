/**
 * The main port's route table and request entry: answer CORS preflights and add CORS headers
 * (`cors.ts`, outermost, as SMG), match method and path, check the keys of protected routes
 * (`auth.ts`: 401/403 in the error envelope, with `www-authenticate`), resolve an inference
 * request's tenant, attach the request id, count SMG's `smg_http_*` metrics, and log
 * control-plane use when control-plane keys are configured. Unknown paths get SMG's empty 404; a
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

  return async (inb, completed) => {
    const method = inb.method;
    // SMG's CORS layer answers every OPTIONS itself, outside routing, auth and metrics.
    if (method === "OPTIONS") return cors.preflight(inb.headers);
    const start = d.clock.now();
    const path = inb.path;
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
    let denied: GatewayError | null = null;
    let keyId: string | null = null;
    let auth: string | null = null;
    const control = route?.controlPlane === true;
    if (route?.protected && !(control ? controlOpen : clientOpen)) {
      const header = inb.headers.get("authorization");
      if (!control) {
        auth = tenants.authenticate(header);
        if (auth === null) denied = clientRefusal(header);
      } else if (!access.controlPlaneKeys && d.apiKey === null) {
        denied = new GatewayError(
          401,
          "unauthorized",
          "control-plane routes are closed when only tenant keys are configured; set --api-key or --control-plane-api-keys",
        );
      } else {
        const v = access.check("control", method, template, header);
        denied = v.error;
        keyId = v.keyId;
      }
    }
    if (!candidates) {
      template = "other";
      res = empty(404);
    } else if (!route) {
      res = empty(405, [["allow", candidates.map((r) => r.method).join(", ")]]);
    } else if (denied !== null) {
      res = errorReply(denied, requestId);
      if (denied.status === 401) {
        const realm = control ? "control-plane" : "smg";
        res.headers.push(["www-authenticate", `Bearer realm="${realm}"`]);
      }
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
    cors.decorate(res.headers, inb.headers.get("origin"));
    if (control && access.controlPlaneKeys) {
      const fields = { key: keyId, method, path, status: res.status, request_id: requestId };
      if (denied !== null) audit.warn("control-plane request refused", fields);
      else if (method === "GET") audit.debug("control-plane request", fields);
      else audit.info("control-plane request", fields);
    }
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

/** Why a protected client route refuses `authorization` (missing or unknown key). */
function clientRefusal(authorization: string | null): GatewayError {
  const missing = authorization === null || !authorization.startsWith("Bearer ");
  return new GatewayError(
    401,
    "unauthorized",
    missing ? "missing API key: send 'Authorization: Bearer <key>'" : "invalid API key",
  );
}
