/**
 * The main port's route table, its handlers called directly (no server): what the worker routes
 * make of the id in their path, and which status-page route needs a key.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { mainRoutes } from "../../lib/server/main_routes.ts";
import type { Route, RouteContext } from "../../lib/server/routes.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";
import { workerSetup } from "../support/workers.ts";

function routes(): Route[] {
  const clock = new FakeClock(0);
  const { registry, manager } = workerSetup(clock);
  return mainRoutes({
    inference: () => Promise.reject(new Error("no inference here")),
    info: {
      registry,
      control: httpWorkerControl(() => Promise.reject(new Error("no fetch"))),
      draining: () => false,
      timeoutMs: 1000,
      clock,
    },
    workers: { registry, manager, clock, grpc: false },
    meshStatus: () => new Response(null, { status: 404 }),
    dashboard: { page: () => new Response("page"), snapshot: () => Response.json({}) },
  });
}

async function call(method: "GET" | "DELETE", path: string): Promise<Response> {
  const route = routes().find((r) => r.method === method && r.path === "/workers/")!;
  const ctx: RouteContext = { path, requestId: "r", completed: Promise.resolve() };
  return await route.handler!(new Request(`http://gw${path}`, { method }), ctx);
}

Deno.test("main routes: a worker id that is not valid percent-encoding is a 400, not a throw", async () => {
  for (const method of ["GET", "DELETE"] as const) {
    for (const path of ["/workers/%ff%ff", "/workers/%E0%A4%A", "/workers/%"]) {
      const res = await call(method, path);
      assert.equal(res.status, 400, `${method} ${path}`);
      assert.equal((await res.json()).code, "BAD_REQUEST");
    }
  }
});

Deno.test("main routes: a percent-encoded worker id is decoded before the lookup", async () => {
  const res = await call("GET", "/workers/0badc0de%2D0000-4000-8000-000000000000");
  assert.equal(res.status, 404);
  assert.equal((await res.json()).code, "WORKER_NOT_FOUND");
});

Deno.test("main routes: the status page is open (it holds no data), its snapshot a control-plane read", () => {
  const r = routes();
  const page = r.find((x) => x.path === "/dashboard")!;
  assert.deepEqual([page.method, page.protected], ["GET", false]);
  const snap = r.find((x) => x.path === "/dashboard/snapshot")!;
  assert.deepEqual([snap.method, snap.protected, snap.controlPlane], ["GET", true, true]);
});
