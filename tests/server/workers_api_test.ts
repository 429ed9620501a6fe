/**
 * The worker control plane, handlers called directly (no server): listing with stats and a model
 * filter, creating (202 + Location, 409 duplicate, 400 bad input), reading (400 non-UUID, 404
 * unknown, `job_status` while pending) and deleting (202, then draining).
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { EgressPolicy } from "../../lib/core/egress.ts";
import {
  createWorker,
  deleteWorker,
  getWorker,
  listWorkers,
  type WorkersApiDeps,
} from "../../lib/server/workers_api.ts";
import { workerSetup } from "../support/workers.ts";

const UNKNOWN_ID = "0badc0de-0000-4000-8000-000000000000";

function setup(egress?: EgressPolicy) {
  const clock = new FakeClock(0);
  const { registry, manager } = workerSetup(clock, { egress });
  const deps: WorkersApiDeps = { registry, manager, clock, grpc: false };
  return { deps, registry, manager };
}

function post(body: unknown): Request {
  return new Request("http://gw/workers", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const list = (d: WorkersApiDeps, query = "") =>
  listWorkers(d, new URL(`http://gw/workers${query}`));

Deno.test("listWorkers: empty registry", async () => {
  const { deps } = setup();
  const res = list(deps);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    workers: [],
    total: 0,
    stats: { prefill_count: 0, decode_count: 0, regular_count: 0 },
  });
});

Deno.test("listWorkers: every worker with counts per type, never the API key", async () => {
  const { deps, manager } = setup();
  manager.add({ url: "http://r1", models: ["llama"], apiKey: "sk-secret" });
  manager.add({ url: "http://r2", models: ["qwen"] });
  manager.add({ url: "http://p1", models: ["llama"], workerType: "prefill", bootstrapPort: 9000 });
  manager.add({ url: "http://d1", models: ["llama"], workerType: "decode" });
  const res = list(deps);
  const text = await res.text();
  assert.ok(!text.includes("sk-secret"), "API key leaked into GET /workers");
  const body = JSON.parse(text);
  assert.equal(body.total, 4);
  assert.deepEqual(body.stats, { prefill_count: 1, decode_count: 1, regular_count: 2 });
  assert.deepEqual(body.workers.map((w: { url: string }) => w.url), [
    "http://r1",
    "http://r2",
    "http://p1",
    "http://d1",
  ]);
  const p1 = body.workers[2];
  assert.equal(p1.worker_type, "prefill");
  assert.equal(p1.bootstrap_port, 9000);
});

Deno.test("listWorkers: ?model= keeps only workers serving that model, stats included", async () => {
  const { deps, manager } = setup();
  manager.add({ url: "http://r1", models: ["llama"] });
  manager.add({ url: "http://r2", models: ["qwen"] });
  manager.add({ url: "http://p1", models: ["llama"], workerType: "prefill" });
  const body = await list(deps, "?model=llama").json();
  assert.deepEqual(body.workers.map((w: { url: string }) => w.url), ["http://r1", "http://p1"]);
  assert.equal(body.total, 2);
  assert.deepEqual(body.stats, { prefill_count: 1, decode_count: 0, regular_count: 1 });
  const none = await list(deps, "?model=mistral").json();
  assert.equal(none.total, 0);
});

Deno.test("createWorker: 202 with Location, and the worker is registered pending", async () => {
  const { deps, registry } = setup();
  const res = await createWorker(
    deps,
    post({ url: "http://10.0.0.1:8000/", models: [{ id: "llama" }], worker_type: "decode" }),
  );
  assert.equal(res.status, 202);
  const body = await res.json();
  assert.equal(body.status, "accepted");
  assert.equal(body.url, "http://10.0.0.1:8000");
  assert.equal(res.headers.get("location"), `/workers/${body.worker_id}`);
  assert.equal(body.location, `/workers/${body.worker_id}`);
  const w = registry.get(body.worker_id);
  assert.ok(w, "registered under the returned id");
  assert.equal(w.status, "pending");
  assert.equal(w.type, "decode");
  assert.deepEqual(w.models, ["llama"]);
});

Deno.test("createWorker: the same URL again is 409 WORKER_ALREADY_EXISTS", async () => {
  const { deps, registry } = setup();
  assert.equal((await createWorker(deps, post({ url: "http://a:8000" }))).status, 202);
  const res = await createWorker(deps, post({ url: "http://a:8000/" }));
  assert.equal(res.status, 409);
  const body = await res.json();
  assert.equal(body.code, "WORKER_ALREADY_EXISTS");
  assert.match(body.error, /http:\/\/a:8000/);
  assert.equal(registry.size, 1);
});

Deno.test("createWorker: bad JSON is 400 BAD_REQUEST", async () => {
  const { deps, registry } = setup();
  const res = await createWorker(deps, post("{not json"));
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.code, "BAD_REQUEST");
  assert.match(body.error, /not valid JSON/);
  assert.equal(registry.size, 0);
});

Deno.test("createWorker: a bad spec is 400 BAD_REQUEST naming the problem", async () => {
  const { deps, registry } = setup();
  const cases: [unknown, RegExp][] = [
    [{ url: "ftp://a" }, /ftp:\/\/a/],
    [{ url: "not a url" }, /not a url/],
    [{}, /url/],
    [[], /JSON object/],
    [{ url: "http://a", worker_type: "encoder" }, /worker_type/],
  ];
  for (const [spec, message] of cases) {
    const res = await createWorker(deps, post(spec));
    assert.equal(res.status, 400, JSON.stringify(spec));
    const body = await res.json();
    assert.equal(body.code, "BAD_REQUEST");
    assert.match(body.error, message);
  }
  assert.equal(registry.size, 0);
});

Deno.test("getWorker: 400 for a non-UUID id, 404 for an unknown one", async () => {
  const { deps } = setup();
  const bad = getWorker(deps, "not-a-uuid");
  assert.equal(bad.status, 400);
  const b = await bad.json();
  assert.equal(b.code, "BAD_REQUEST");
  assert.match(b.error, /'not-a-uuid'/);
  const missing = getWorker(deps, UNKNOWN_ID);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).code, "WORKER_NOT_FOUND");
});

Deno.test("getWorker: a pending worker shows a job_status; a ready one does not", async () => {
  const { deps, manager } = setup();
  const w = manager.add({ url: "http://a", models: ["m"] });
  const pending = await getWorker(deps, w.id).json();
  assert.equal(pending.id, w.id);
  assert.equal(pending.status, "pending");
  assert.equal(pending.is_healthy, false);
  assert.deepEqual(pending.job_status, {
    job_type: "add_worker",
    worker_url: "http://a",
    status: "pending",
    message: "waiting for the worker to answer its health check",
  });
  w.setStatus("ready");
  const again = await getWorker(deps, w.id).json();
  assert.equal(again.status, "ready");
  assert.equal(again.is_healthy, true);
  assert.equal(again.job_status, undefined);
});

Deno.test({
  name: "getWorker and deleteWorker: an upper-case UUID finds the worker",
  fn: async () => {
    const { deps, manager } = setup();
    const w = manager.add({ url: "http://a" });
    const res = getWorker(deps, w.id.toUpperCase());
    assert.equal(res.status, 200);
    assert.equal((await res.json()).id, w.id);
    assert.equal(deleteWorker(deps, w.id.toUpperCase()).status, 202);
    await manager.stop();
  },
});

Deno.test("deleteWorker: 202, then the worker is draining and takes no new requests", async () => {
  const { deps, manager, registry } = setup();
  const w = manager.add({ url: "http://a" });
  w.setStatus("ready");
  w.ownInFlight = 1; // keeps it in the registry while it drains
  const res = deleteWorker(deps, w.id);
  assert.equal(res.status, 202);
  const body = await res.json();
  assert.equal(body.status, "accepted");
  assert.equal(body.worker_id, w.id);
  assert.match(body.message, /draining/);
  assert.equal(w.status, "draining");
  assert.equal(w.available(0), false);
  assert.equal((await getWorker(deps, w.id).json()).status, "draining");
  assert.equal(deleteWorker(deps, w.id).status, 202, "deleting again is accepted");
  w.ownInFlight = 0;
  await manager.stop();
  assert.equal(registry.size, 0);
  assert.equal(getWorker(deps, w.id).status, 404);
});

Deno.test("deleteWorker: 400 for a non-UUID id, 404 for an unknown one", async () => {
  const { deps, registry, manager } = setup();
  manager.add({ url: "http://a" });
  const bad = deleteWorker(deps, "http://a");
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).code, "BAD_REQUEST");
  const missing = deleteWorker(deps, UNKNOWN_ID);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).code, "WORKER_NOT_FOUND");
  assert.equal(registry.size, 1);
  assert.equal(registry.all()[0].status, "pending", "untouched");
  await manager.stop();
});

Deno.test("createWorker: a host the egress policy refuses is 403 WORKER_HOST_NOT_ALLOWED saying why", async () => {
  const egress = new EgressPolicy({
    allowlist: ["10.0.0.0/8"],
    own: [{ role: "main", host: "0.0.0.0", port: 30000 }],
    localAddresses: () => [],
  });
  const { deps, registry } = setup(egress);
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ url: "http://169.254.169.254/latest" }, /169\.254\.169\.254:80 is link-local/],
    [{ url: "http://172.16.0.1:8000" }, /172\.16\.0\.1:8000 is not in --worker-host-allowlist/],
    [{ url: "http://127.0.0.1:30000" }, /this gateway's own main port/],
    [
      { url: "http://10.0.0.2:8000", labels: { kv_events: "tcp://[fe80::1]:5557" } },
      /label kv_events: \[fe80::1\]:5557 is link-local/,
    ],
    [
      { url: "http://172.16.0.2:8000", worker_type: "prefill", bootstrap_port: 9000 },
      /not in --worker-host-allowlist/,
    ],
  ];
  for (const [spec, why] of cases) {
    const res = await createWorker(deps, post(spec));
    assert.equal(res.status, 403, JSON.stringify(spec));
    const body = await res.json();
    assert.equal(body.code, "WORKER_HOST_NOT_ALLOWED");
    assert.match(body.error, why);
  }
  assert.equal(registry.all().length, 0, "nothing was registered");
  const ok = await createWorker(deps, post({ url: "http://10.0.0.3:8000" }));
  assert.equal(ok.status, 202);
  await ok.body?.cancel();
});

Deno.test("createWorker: a host the runtime's net grant does not reach is accepted with a warning", async () => {
  const { deps } = setup();
  for (const url of ["http://127.0.0.1:8000", "http://10.0.0.1:8000"]) {
    const granted =
      Deno.permissions.querySync({ name: "net", host: new URL(url).host }).state === "granted";
    const body = await (await createWorker(deps, post({ url }))).json();
    assert.equal(body.status, "accepted");
    assert.equal("warning" in body, !granted, url);
    if (!granted) assert.match(body.warning, /runtime net grant does not reach/);
  }
});
