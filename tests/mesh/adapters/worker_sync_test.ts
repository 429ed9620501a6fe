/** Worker registry sync: each rule docs/high-availability.md states for it, as a scenario. */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { FakeClock } from "../../../lib/core/clock.ts";
import { EgressPolicy } from "../../../lib/core/egress.ts";
import { createLogger } from "../../../lib/core/log.ts";
import { WORKERS_NS, WorkerSync } from "../../../lib/mesh/adapters/worker_sync.ts";
import { LwwStore } from "../../../lib/mesh/store/lww_store.ts";
import { WorkerManager } from "../../../lib/workers/manager.ts";
import { WorkerRegistry } from "../../../lib/workers/registry.ts";

interface Router {
  name: string;
  registry: WorkerRegistry;
  manager: WorkerManager;
  store: LwwStore;
  sync: WorkerSync;
  logs: string[];
}

/**
 * Two routers whose stores replicate to each other at once (the transport is tested elsewhere);
 * `bEgress` is router b's egress policy.
 */
function pair(bEgress?: EgressPolicy) {
  const clock = new FakeClock();
  const make = (name: string, egress?: EgressPolicy): Router => {
    const c = defaultConfig();
    const registry = new WorkerRegistry();
    const logs: string[] = [];
    const log = createLogger({ level: "info", sink: (l) => logs.push(l) });
    const manager = new WorkerManager({
      registry,
      health: c.health,
      circuitBreaker: c.circuitBreaker,
      clock,
      log,
      egress,
    });
    const store = new LwwStore(`${name}#1`);
    const sync = new WorkerSync({ registry, manager, store, router: name, clock, log });
    return { name, registry, manager, store, sync, logs };
  };
  const a = make("a");
  const b = make("b", bEgress);
  let linked = true;
  for (const [from, to] of [[a, b], [b, a]]) {
    from.store.onChange((e, origin) => {
      if (linked && origin === "local") to.store.apply(e, 0);
    });
  }
  a.sync.start();
  b.sync.start();
  return { a, b, clock, unlink: () => (linked = false) };
}

const urlOf = (r: Router) => r.registry.all().map((w) => `${w.url} ${w.origin} ${w.status}`).sort();

Deno.test("worker sync: a router's workers are imported by its peer, health checked there, without the API key", () => {
  const { a, b } = pair();
  const w = a.manager.add({ url: "http://10.0.1.1:8000", apiKey: "secret", models: ["m"] });
  assert.deepEqual(
    urlOf(b),
    ["http://10.0.1.1:8000 mesh not_ready"],
    "the owner has not probed it yet",
  );
  assert.ok(!new TextDecoder().decode(a.store.get(WORKERS_NS, w.id)!).includes("secret"));
  assert.equal(b.registry.byUrl("http://10.0.1.1:8000")!.apiKey, null);
  w.setStatus("ready");
  assert.deepEqual(urlOf(b), ["http://10.0.1.1:8000 mesh ready"], "owner healthy: promoted");
  w.setStatus("not_ready");
  assert.deepEqual(urlOf(b), ["http://10.0.1.1:8000 mesh not_ready"], "owner unhealthy: demoted");
  assert.deepEqual(
    urlOf(a),
    ["http://10.0.1.1:8000 local not_ready"],
    "the owner never imports its own",
  );
});

Deno.test("worker sync: the owner's health only nudges; failed and draining imports are the peer's own call", () => {
  const { a, b } = pair();
  const w = a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  const imp = b.registry.byUrl(w.url)!;
  imp.setStatus("failed"); // b's own probes say so
  w.setStatus("ready");
  assert.equal(imp.status, "failed");
});

Deno.test("worker sync: only the owner removes; a peer's delete lasts until the next reconcile", () => {
  const { a, b, clock } = pair();
  const w = a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  const imp = b.registry.byUrl(w.url)!;
  b.manager.remove(imp.id);
  assert.equal(b.registry.byUrl(w.url), undefined);
  clock.advance(30_000);
  assert.deepEqual(
    urlOf(b),
    ["http://10.0.1.1:8000 mesh not_ready"],
    "re-imported by the reconcile",
  );
  // A tombstone written by the peer is answered by the owner publishing again.
  b.store.write(WORKERS_NS, w.id, null, 0);
  assert.ok(a.store.get(WORKERS_NS, w.id), "the owner re-published");
  assert.equal(b.registry.all().length, 1);
  // The owner's removal removes it everywhere.
  a.manager.remove(w.id);
  assert.deepEqual(urlOf(b), []);
});

Deno.test("worker sync: a router keeps its own registration of a URL over a peer's copy", () => {
  const { a, b } = pair();
  b.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  assert.deepEqual(urlOf(b), ["http://10.0.1.1:8000 local pending"]);
  assert.deepEqual(urlOf(a), ["http://10.0.1.1:8000 local pending"]);
});

Deno.test("worker sync: a departed router's workers stay; a missed change is recovered by reconcile", () => {
  const { a, b, clock, unlink } = pair();
  const w = a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  a.sync.stop(); // a leaves for good
  clock.advance(120_000);
  assert.equal(b.registry.byUrl(w.url)?.origin, "mesh", "still imported");
  // A change b never heard of: its store gets it later (anti-entropy), the reconcile applies it.
  unlink();
  const { b: c } = pair();
  c.store.apply({
    ns: WORKERS_NS,
    key: "remote-1",
    value: new TextEncoder().encode(JSON.stringify({
      url: "http://10.0.2.2:8000",
      models: null,
      worker_type: "prefill",
      labels: {},
      priority: 50,
      cost: 1,
      bootstrap_port: 8998,
      disable_health_check: false,
      healthy: true,
      owner: "z",
    })),
    clock: 1,
    replica: "z#1",
  }, 0);
  const pd = c.registry.byUrl("http://10.0.2.2:8000")!;
  assert.equal(pd.type, "prefill");
  assert.equal(pd.bootstrapPort, 8998);
  assert.equal(pd.status, "ready");
});

Deno.test("worker sync: a loopback URL is published with a warning", () => {
  const { a } = pair();
  a.manager.add({ url: "http://127.0.0.1:8000", models: ["m"] });
  assert.ok(a.logs.some((l) => l.includes("loopback worker URL")));
});

Deno.test("worker sync: an owner that restarts with new worker ids retires its old keys; peers follow", () => {
  const { a, b } = pair();
  const old = a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  const oldKey = old.id;
  assert.equal(b.registry.byUrl(old.url)?.meshKey, oldKey);
  // "a" restarts: a new process (empty registry, new ids) under the same router name, whose
  // store then receives its previous life's key from b (anti-entropy).
  const clock = new FakeClock();
  const c = defaultConfig();
  const registry = new WorkerRegistry();
  const log = createLogger({ level: "error", sink: () => {} });
  const manager = new WorkerManager({
    registry,
    health: c.health,
    circuitBreaker: c.circuitBreaker,
    clock,
    log,
  });
  const store = new LwwStore("a#2");
  store.onChange((e, origin) => origin === "local" && b.store.apply(e, 0));
  b.store.onChange((e, origin) => origin === "local" && store.apply(e, 0));
  const sync = new WorkerSync({ registry, manager, store, router: "a", clock, log });
  sync.start();
  const fresh = manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  for (const e of [...b.store.all()]) store.apply(e, 0); // anti-entropy brings the old key
  assert.equal(store.get(WORKERS_NS, oldKey), undefined, "the old key was retired by its owner");
  assert.equal(b.store.get(WORKERS_NS, oldKey), undefined);
  const imp = b.registry.byUrl(fresh.url)!;
  assert.equal(imp.meshKey, fresh.id, "the import follows the live key");
  assert.equal(b.registry.all().length, 1, "never two imports of one URL");
  // The owner's removal now reaches the import.
  manager.remove(fresh.id);
  assert.equal(b.registry.byUrl(fresh.url), undefined);
  sync.stop();
});

Deno.test("worker sync: a peer's worker outside this router's allow-list is not imported, warned once", () => {
  const egress = new EgressPolicy({
    allowlist: ["10.0.1.0/24"],
    own: [],
    localAddresses: () => [],
  });
  const { a, b, clock } = pair(egress);
  a.manager.add({ url: "http://10.0.1.1:8000", models: ["m"] });
  const outside = a.manager.add({ url: "http://10.0.2.1:8000", models: ["m"] });
  const metadata = a.manager.add({
    url: "http://10.0.1.2:8000",
    models: ["m"],
    labels: { kv_events: "tcp://169.254.169.254:80" },
  });
  assert.deepEqual(urlOf(b), ["http://10.0.1.1:8000 mesh not_ready"]);
  outside.setStatus("ready"); // a republish of the same key
  metadata.setStatus("ready");
  clock.advance(30_000); // and a reconcile
  assert.deepEqual(urlOf(b), ["http://10.0.1.1:8000 mesh not_ready"]);
  const warned = b.logs.filter((l) => l.includes("mesh worker refused by the egress allow-list"));
  assert.equal(warned.length, 2, warned.join("\n"));
  assert.match(warned[0], /worker=http:\/\/10\.0\.2\.1:8000 owner=a/);
  assert.match(warned[0], /is not in --worker-host-allowlist/);
  assert.match(warned[1], /label kv_events: 169\.254\.169\.254:80 is link-local/);
  // The owner keeps its workers: the allow-list is each router's own.
  assert.equal(a.registry.all().length, 3);
});
