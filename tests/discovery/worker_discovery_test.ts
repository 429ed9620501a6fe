/**
 * Pods to workers, rule by rule: a Running and Ready pod matching the selector is registered at
 * http://PODIP:PORT (a local registration); not ready leaves routing and returns when ready; a
 * deleted or terminating pod is drained and removed; a relist forgets pods that vanished; a
 * URL also given by flags is not taken over or removed; PD legs by selector with the bootstrap
 * port annotation; the model id from the namespace, a label or an annotation; IPv6 pod IPs.
 */

import assert from "node:assert/strict";
import { defaultConfig, type DiscoveryConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { EgressPolicy } from "../../lib/core/egress.ts";
import { createLogger, silentLogger } from "../../lib/core/log.ts";
import { podWorker } from "../../lib/discovery/pods.ts";
import { WorkerDiscovery } from "../../lib/discovery/worker_discovery.ts";
import { WorkerManager } from "../../lib/workers/manager.ts";
import { WorkerRegistry } from "../../lib/workers/registry.ts";
import { pod } from "../support/fake_kube.ts";
import { until } from "../../support/wait.ts";

function setup(over: Partial<DiscoveryConfig> = {}, pd = false, egress?: EgressPolicy) {
  const c = defaultConfig();
  c.health.drainSettleSecs = 0;
  const config: DiscoveryConfig = {
    ...c.discovery,
    enabled: true,
    selector: { app: "sglang" },
    port: 8000,
    ...over,
  };
  const registry = new WorkerRegistry();
  const manager = new WorkerManager({
    registry,
    health: c.health,
    circuitBreaker: c.circuitBreaker,
    clock: new FakeClock(),
    log: silentLogger,
    egress,
  });
  const counts: string[] = [];
  const logs: string[] = [];
  const d = new WorkerDiscovery({
    config,
    pd,
    registry,
    manager,
    log: createLogger({ level: "warn", sink: (l) => logs.push(l) }),
    counters: {
      registered: (r) => counts.push(`reg:${r}`),
      deregistered: (r) => counts.push(`dereg:${r}`),
      synced: () => {},
      discovered: () => {},
    },
  });
  // Removals drain first: let them finish before reading the registry.
  const settled = () =>
    until(
      () => registry.all().every((w) => w.status !== "draining"),
      (l) => registry.subscribe(l),
      "the removals",
    );
  const urls = () =>
    registry.all().filter((w) => w.status !== "draining").map((w) => `${w.url} ${w.type}`).sort();
  return { d, registry, manager, counts, urls, settled, logs };
}

const W = { app: "sglang" };

Deno.test("worker discovery: ready pods become workers; not ready, deleted and relisted ones leave", async () => {
  const { d, registry, counts, urls, settled } = setup();
  d.onList([
    pod("a", "10.0.0.1", W),
    pod("b", "10.0.0.2", W, { ready: false }),
    pod("x", "10.0.0.9", { app: "db" }),
  ]);
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
  assert.equal(registry.all()[0].origin, "local", "published by the mesh like any own worker");
  assert.equal(d.size, 2, "b is known, not serving");
  d.onEvent("MODIFIED", pod("b", "10.0.0.2", W));
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular", "http://10.0.0.2:8000 regular"]);
  d.onEvent("MODIFIED", pod("a", "10.0.0.1", W, { ready: false }));
  assert.deepEqual(urls(), ["http://10.0.0.2:8000 regular"]);
  await settled();
  d.onEvent("MODIFIED", pod("a", "10.0.0.1", W));
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular", "http://10.0.0.2:8000 regular"]);
  const terminating = pod("b", "10.0.0.2", W);
  terminating.metadata!.deletionTimestamp = "2026-12-01T00:00:00Z";
  d.onEvent("MODIFIED", terminating);
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
  d.onEvent("ADDED", pod("c", "10.0.0.3", W));
  d.onList([pod("c", "10.0.0.3", W)]); // a vanished while the watch was down
  assert.deepEqual(urls(), ["http://10.0.0.3:8000 regular"]);
  d.onEvent("DELETED", pod("c", "10.0.0.3", W));
  assert.deepEqual(urls(), []);
  assert.equal(d.size, 0);
  assert.ok(
    counts.includes("dereg:not_ready") && counts.includes("dereg:deleted") &&
      counts.includes("dereg:gone"),
  );
});

Deno.test("worker discovery: a URL registered by flags is neither taken over nor removed", () => {
  const { d, manager, urls, counts } = setup();
  manager.add({ url: "http://10.0.0.1:8000" });
  d.onList([pod("a", "10.0.0.1", W)]);
  assert.deepEqual(counts, ["reg:duplicate"]);
  d.onEvent("DELETED", pod("a", "10.0.0.1", W));
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
});

Deno.test("worker discovery: a URL still draining when its pod returns is registered at the resync", async () => {
  const { d, urls, settled } = setup();
  d.onList([pod("a", "10.0.0.1", W)]);
  d.onEvent("MODIFIED", pod("a", "10.0.0.1", W, { ready: false }));
  d.onEvent("MODIFIED", pod("a", "10.0.0.1", W)); // the old registration is still draining
  await settled();
  d.resync();
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
});

Deno.test("worker discovery: PD legs by selector, with the bootstrap port annotation", () => {
  const { d, registry } = setup({
    selector: {},
    prefillSelector: { role: "prefill" },
    decodeSelector: { role: "decode" },
  }, true);
  d.onList([
    pod("p", "10.0.1.1", { role: "prefill" }, {
      annotations: { "sglang.ai/bootstrap-port": "8998" },
    }),
    pod("q", "10.0.1.2", { role: "prefill" }, { annotations: { "sglang.ai/bootstrap-port": "x" } }),
    pod("d", "10.0.1.3", { role: "decode" }),
  ]);
  const got = registry.all().map((w) => [w.url, w.type, w.bootstrapPort]).sort();
  assert.deepEqual(got, [
    ["http://10.0.1.1:8000", "prefill", 8998],
    ["http://10.0.1.2:8000", "prefill", null],
    ["http://10.0.1.3:8000", "decode", null],
  ]);
});

Deno.test("podWorker: the model id from the namespace, a label or an annotation; IPv6; no IP yet", () => {
  const c = { ...defaultConfig().discovery, selector: W, port: 30000 };
  const p = pod("a", "fd00::1", { ...W, model: "llama" }, {
    ns: "team-x",
    annotations: { "smg.ai/model": "qwen" },
  });
  assert.equal(podWorker(p, { ...c, modelIdFrom: { from: "namespace" } }, false)?.model, "team-x");
  assert.equal(
    podWorker(p, { ...c, modelIdFrom: { from: "label", key: "model" } }, false)?.model,
    "llama",
  );
  assert.equal(
    podWorker(p, { ...c, modelIdFrom: { from: "annotation", key: "smg.ai/model" } }, false)?.model,
    "qwen",
  );
  assert.equal(podWorker(p, c, false)?.url, "http://[fd00::1]:30000");
  const pending = pod("b", "", W, { phase: "Pending" });
  assert.deepEqual([podWorker(pending, c, false)?.serving, podWorker(pending, c, false)?.url], [
    false,
    "",
  ]);
  assert.equal(podWorker(pod("c", "10.0.0.1", { app: "db" }), c, false), null);
});

Deno.test("worker discovery: a serving pod's worker removed by another path is registered again", async () => {
  const { d, registry, manager, urls, settled } = setup();
  d.onList([pod("a", "10.0.0.1", W)]);
  manager.remove(registry.all()[0].id); // e.g. --remove-unhealthy-workers, or DELETE /workers/{id}
  await settled();
  assert.deepEqual(urls(), []);
  d.resync();
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
});

Deno.test("worker discovery: pods outside the allow-list are not registered, warned once each", () => {
  const egress = new EgressPolicy({
    allowlist: ["10.0.0.0/24"],
    own: [],
    localAddresses: () => [],
  });
  const { d, counts, urls, logs } = setup({}, false, egress);
  d.onList([pod("a", "10.0.0.1", W), pod("b", "10.0.9.1", W), pod("m", "169.254.169.254", W)]);
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
  d.onEvent("MODIFIED", pod("b", "10.0.9.1", W)); // a status update refuses it again, silently
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular"]);
  assert.deepEqual(counts, ["reg:ok", "reg:refused", "reg:refused", "reg:refused"]);
  const warned = logs.filter((l) =>
    l.includes("discovered worker refused by the egress allow-list")
  );
  assert.equal(warned.length, 2, warned.join("\n"));
  assert.match(
    warned[0],
    /pod=default\/b worker=http:\/\/10\.0\.9\.1:8000 .*not in --worker-host-allowlist/,
  );
  assert.match(warned[1], /pod=default\/m .*is link-local/);
  // Moved into the allow-list (a new pod IP), the pod registers.
  d.onEvent("MODIFIED", pod("b", "10.0.0.2", W));
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 regular", "http://10.0.0.2:8000 regular"]);
});

Deno.test("worker discovery: PD pods pass the same allow-list", () => {
  const egress = new EgressPolicy({
    allowlist: ["10.0.0.0/24"],
    own: [],
    localAddresses: () => [],
  });
  const { d, urls } = setup(
    { selector: {}, prefillSelector: { role: "prefill" }, decodeSelector: { role: "decode" } },
    true,
    egress,
  );
  d.onList([
    pod("p", "10.0.0.1", { role: "prefill" }),
    pod("q", "10.7.0.1", { role: "prefill" }),
    pod("d", "10.7.0.2", { role: "decode" }),
    pod("e", "10.0.0.2", { role: "decode" }),
  ]);
  assert.deepEqual(urls(), ["http://10.0.0.1:8000 prefill", "http://10.0.0.2:8000 decode"]);
});
