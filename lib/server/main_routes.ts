/**
 * The main port's routes: the inference endpoints (to the proxy), liveness and readiness, the
 * info endpoints answered from the first ready worker, the workers API, the mesh status and the
 * status page (its snapshot is a control-plane route; the page itself holds no data).
 * Method, path and protection per route (the API key, or the control-plane keys of the workers,
 * loads, cache and mesh routes, as SMG's admin and worker routes); `routes.ts` matches and
 * dispatches them.
 */

import type { Inbound, Reply } from "../core/http.ts";
import { type Endpoint, ENDPOINT_PATHS } from "../core/types.ts";
import type { RequestContext } from "../proxy/types.ts";
import * as info from "./info_api.ts";
import type { Dashboard } from "../dashboard/feature.ts";
import type { Route } from "./routes.ts";
import * as workersApi from "./workers_api.ts";

/** What the routes answer from. */
export interface MainRouteDeps {
  /** The proxy's handler of an inference request. */
  inference: (inb: Inbound, endpoint: Endpoint, ctx: RequestContext) => Promise<Reply>;
  /** The info endpoints' dependencies. */
  info: info.InfoApiDeps;
  /** The workers API's dependencies. */
  workers: workersApi.WorkersApiDeps;
  /** `GET /mesh/status`. */
  meshStatus: () => Response;
  /** The status page: `GET /dashboard` (open: no data) and its snapshot (control plane). */
  dashboard: Pick<Dashboard, "page" | "snapshot">;
}

const okBody = new TextEncoder().encode("OK");
const ok = (): Promise<Reply> =>
  Promise.resolve({ status: 200, headers: [["content-type", "text/plain"]], body: okBody });
/** The worker id in a `/workers/{id}` path; left encoded when it is not valid percent-encoding. */
function idOf(path: string): string {
  const raw = path.slice("/workers/".length);
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw; // not a UUID either: the handler answers 400
  }
}

/** The main port's routes over `d`. */
export function mainRoutes(d: MainRouteDeps): Route[] {
  return [
    ...(Object.keys(ENDPOINT_PATHS) as Endpoint[]).map((endpoint): Route => ({
      method: "POST",
      path: ENDPOINT_PATHS[endpoint],
      protected: true,
      stampsRequestId: true,
      inbound: (inb, ctx) => d.inference(inb, endpoint, ctx),
    })),
    { method: "GET", path: "/health", protected: false, inbound: ok },
    { method: "GET", path: "/liveness", protected: false, inbound: ok },
    {
      method: "GET",
      path: "/readiness",
      protected: false,
      handler: () => info.readiness(d.info),
    },
    {
      method: "GET",
      path: "/health_generate",
      protected: false,
      handler: (_r, ctx) => info.firstReady(d.info, "healthGenerate", ctx.requestId),
    },
    {
      method: "GET",
      path: "/v1/models",
      protected: false,
      handler: () => info.listModels(d.info),
    },
    {
      method: "GET",
      path: "/get_server_info",
      protected: false,
      handler: (_r, ctx) => info.firstReady(d.info, "serverInfo", ctx.requestId),
    },
    {
      method: "GET",
      path: "/get_model_info",
      protected: false,
      handler: (_r, ctx) => info.firstReady(d.info, "modelInfo", ctx.requestId),
    },
    {
      method: "GET",
      path: "/get_loads",
      protected: true,
      controlPlane: true,
      handler: () => info.getLoads(d.info),
    },
    {
      method: "POST",
      path: "/flush_cache",
      protected: true,
      controlPlane: true,
      handler: () => info.flushCache(d.info),
    },
    {
      method: "GET",
      path: "/mesh/status",
      protected: true,
      controlPlane: true,
      handler: () => d.meshStatus(),
    },
    { method: "GET", path: "/dashboard", protected: false, handler: () => d.dashboard.page() },
    {
      method: "GET",
      path: "/dashboard/snapshot",
      protected: true,
      controlPlane: true,
      handler: (req) => d.dashboard.snapshot(new URL(req.url)),
    },
    {
      method: "GET",
      path: "/workers",
      protected: true,
      controlPlane: true,
      handler: (req) => workersApi.listWorkers(d.workers, new URL(req.url)),
    },
    {
      method: "POST",
      path: "/workers",
      protected: true,
      controlPlane: true,
      handler: (req) => workersApi.createWorker(d.workers, req),
    },
    {
      method: "GET",
      path: "/workers/",
      protected: true,
      controlPlane: true,
      handler: (_r, ctx) => workersApi.getWorker(d.workers, idOf(ctx.path)),
    },
    {
      method: "DELETE",
      path: "/workers/",
      protected: true,
      controlPlane: true,
      handler: (_r, ctx) => workersApi.deleteWorker(d.workers, idOf(ctx.path)),
    },
  ];
}
