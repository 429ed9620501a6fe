/**
 * Who may call what, per SMG's auth matrix: the client `--api-key` on inference, the
 * control-plane keys (admin: everything; user: reads) on the worker and admin routes, each
 * falling back as SMG does, and clear 401/403 bodies in the gateway's error envelope, on both
 * servers of the main port. Control-plane use is logged with the key's id, never the key.
 */

import assert from "node:assert/strict";
import type { ControlPlaneKey } from "../../lib/config/config.ts";
import { createLogger } from "../../lib/core/log.ts";
import { createAccess, type Guard } from "../../lib/server/auth.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";

const ADMIN: ControlPlaneKey = { id: "ops", name: "Operations", role: "admin", key: "admin-key" };
const USER: ControlPlaneKey = { id: "dash", name: "Dashboard", role: "user", key: "read-key" };

/** The status `access` answers (200 when allowed) for a request. */
function statusOf(
  access: ReturnType<typeof createAccess>,
  guard: Guard,
  method: string,
  token: string | null,
): number {
  const v = access.check(guard, method, "/workers", token === null ? null : `Bearer ${token}`);
  return v.error?.status ?? 200;
}

Deno.test("access: SMG's matrix over --api-key and --control-plane-api-keys", () => {
  type Row = [string, string | null, ControlPlaneKey[], Guard, string, string | null, number];
  const rows: Row[] = [
    // Nothing configured: everything open.
    ["open", null, [], "client", "POST", null, 200],
    ["open", null, [], "control", "DELETE", null, 200],
    // --api-key alone guards both.
    ["api key", "client-key", [], "client", "POST", "client-key", 200],
    ["api key", "client-key", [], "client", "POST", null, 401],
    ["api key", "client-key", [], "client", "POST", "client-keY", 401],
    ["api key", "client-key", [], "control", "DELETE", "client-key", 200],
    ["api key", "client-key", [], "control", "GET", null, 401],
    // Control-plane keys alone: inference stays open; the control plane needs them.
    ["cp keys", null, [ADMIN, USER], "client", "POST", null, 200],
    ["cp keys", null, [ADMIN, USER], "control", "GET", null, 401],
    ["cp keys", null, [ADMIN, USER], "control", "GET", "nope", 401],
    ["cp keys", null, [ADMIN, USER], "control", "POST", "admin-key", 200],
    ["cp keys", null, [ADMIN, USER], "control", "DELETE", "admin-key", 200],
    ["cp keys", null, [ADMIN, USER], "control", "GET", "read-key", 200],
    ["cp keys", null, [ADMIN, USER], "control", "POST", "read-key", 403],
    ["cp keys", null, [ADMIN, USER], "control", "DELETE", "read-key", 403],
    // Both: each key opens its own routes only.
    ["both", "client-key", [ADMIN, USER], "client", "POST", "client-key", 200],
    ["both", "client-key", [ADMIN, USER], "client", "POST", "admin-key", 401],
    ["both", "client-key", [ADMIN, USER], "control", "GET", "client-key", 401],
    ["both", "client-key", [ADMIN, USER], "control", "GET", "admin-key", 200],
  ];
  for (const [what, apiKey, keys, guard, method, token, want] of rows) {
    const access = createAccess(apiKey, keys);
    assert.equal(
      statusOf(access, guard, method, token),
      want,
      `${what}: ${guard} ${method} ${token}`,
    );
  }
});

Deno.test("access: refusals say what is missing or wrong, and name the key's id", () => {
  const access = createAccess("client-key", [ADMIN, USER]);
  const message = (guard: Guard, method: string, authorization: string | null) =>
    access.check(guard, method, "/workers/{id}", authorization).error?.message;
  assert.equal(
    message("client", "POST", null),
    "missing API key: send 'Authorization: Bearer <key>'",
  );
  assert.equal(
    message("client", "POST", "Basic abc"),
    "missing API key: send 'Authorization: Bearer <key>'",
  );
  assert.equal(message("client", "POST", "Bearer x"), "invalid API key");
  assert.equal(
    message("control", "GET", null),
    "missing control-plane key: send 'Authorization: Bearer <key>' with a --control-plane-api-keys key",
  );
  assert.equal(message("control", "GET", "Bearer x"), "invalid control-plane key");
  assert.equal(
    message("control", "GET", "Bearer client-key"),
    "the client API key does not open control-plane routes; use a --control-plane-api-keys key",
  );
  assert.equal(
    message("control", "DELETE", "bearer read-key"),
    "control-plane key 'dash' has role user, which may only read (GET); DELETE /workers/{id} needs an admin key",
  );
  const ok = access.check("control", "DELETE", "/workers/{id}", "Bearer admin-key");
  assert.deepEqual(ok, { error: null, keyId: "ops" });
});

/** A request to the gateway with `token` as bearer key (none when null). */
function call(g: TestGateway, method: string, path: string, token: string | null, body?: unknown) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
  return fetch(g.url + path, init);
}

/** Status and body of a response, the body read. */
async function answer(
  r: Promise<Response>,
): Promise<{ status: number; body: unknown; r: Response }> {
  const res = await r;
  const text = await res.text();
  return {
    status: res.status,
    body: text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text,
    r: res,
  };
}

for (const httpServer of ["own", "deno"] as const) {
  Deno.test(`auth (${httpServer}): control-plane keys guard the worker and admin routes`, async () => {
    const w = new FakeWorker();
    const extra = new FakeWorker({ model: "other-model" });
    const lines: string[] = [];
    const log = createLogger({ level: "info", sink: (l) => lines.push(l) });
    const g = await startGateway([w.url], {
      httpServer,
      apiKey: "client-key",
      controlPlaneApiKeys: [ADMIN, USER],
    }, { log });
    try {
      // No key: 401 in the envelope, with the realm.
      const none = await answer(call(g, "GET", "/workers", null));
      assert.equal(none.status, 401);
      assert.equal(none.r.headers.get("www-authenticate"), 'Bearer realm="control-plane"');
      assert.equal(none.r.headers.get("x-smg-error-code"), "unauthorized");
      assert.ok(none.r.headers.get("x-request-id"));
      assert.deepEqual(none.body, {
        error: {
          message:
            "missing control-plane key: send 'Authorization: Bearer <key>' with a --control-plane-api-keys key",
          type: "Unauthorized",
          code: "unauthorized",
          param: null,
        },
      });
      // The client key opens inference, not the control plane.
      assert.equal((await answer(call(g, "GET", "/workers", "client-key"))).status, 401);
      const chat = { model: "test-model", messages: [{ role: "user", content: "hi" }] };
      assert.equal(
        (await answer(call(g, "POST", "/v1/chat/completions", "client-key", chat))).status,
        200,
      );
      // A control-plane key does not open inference.
      assert.equal(
        (await answer(call(g, "POST", "/v1/chat/completions", "admin-key", chat))).status,
        401,
      );

      // A user key reads; writes are 403 naming the key and what is needed.
      const list = await answer(call(g, "GET", "/workers", "read-key"));
      assert.equal(list.status, 200);
      assert.equal((list.body as { total: number }).total, 1);
      assert.equal((await answer(call(g, "GET", "/get_loads", "read-key"))).status, 200);
      const add = await answer(call(g, "POST", "/workers", "read-key", { url: extra.url }));
      assert.equal(add.status, 403);
      assert.equal(add.r.headers.get("x-smg-error-code"), "forbidden");
      assert.deepEqual(add.body, {
        error: {
          message:
            "control-plane key 'dash' has role user, which may only read (GET); POST /workers needs an admin key",
          type: "Forbidden",
          code: "forbidden",
          param: null,
        },
      });
      assert.equal((await answer(call(g, "POST", "/flush_cache", "read-key"))).status, 403);
      assert.equal(g.gw.registry.all().length, 1, "nothing was added");

      // An admin key does everything.
      const added = await answer(call(g, "POST", "/workers", "admin-key", { url: extra.url }));
      assert.equal(added.status, 202);
      const id = (added.body as { worker_id: string }).worker_id;
      assert.equal((await answer(call(g, "GET", `/workers/${id}`, "read-key"))).status, 200);
      const del = await answer(call(g, "DELETE", `/workers/${id}`, "read-key"));
      assert.equal(del.status, 403);
      assert.match(
        (del.body as { error: { message: string } }).error.message,
        /DELETE \/workers\/\{id\} needs an admin key/,
      );
      assert.equal((await answer(call(g, "DELETE", `/workers/${id}`, "admin-key"))).status, 202);

      // Probes stay public.
      assert.equal((await answer(call(g, "GET", "/health", null))).status, 200);
      assert.equal((await answer(call(g, "GET", "/readiness", null))).status, 200);

      // Control-plane use is logged by key id; the keys themselves never are.
      const audit = lines.filter((l) => l.includes("module=audit"));
      assert.ok(
        audit.some((l) =>
          /control-plane request refused.*key=dash.*method=POST.*status=403/.test(l)
        ),
        audit.join("\n"),
      );
      assert.ok(
        audit.some((l) => /msg="control-plane request".*key=ops.*method=POST.*status=202/.test(l)),
        audit.join("\n"),
      );
      assert.ok(
        !lines.some((l) => /admin-key|read-key|client-key/.test(l)),
        "no key in any log line",
      );
    } finally {
      await g.close();
      await w.close();
      await extra.close();
    }
  });
}
