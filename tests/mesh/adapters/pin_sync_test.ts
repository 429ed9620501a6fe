/**
 * Pin sync over the replicated store of an in-memory mesh under fake time: a `manual` key
 * pinned on one router routes to the same worker on the others; sticky-session pins likewise;
 * two halves of a partition that pin one key to different workers agree on one after the heal
 * (the later write by Lamport clock, then replica id); a malformed pin value is ignored; a pin
 * idle everywhere leaves the store while one in use on some router stays.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { PINS_NS, PinSync } from "../../../lib/mesh/adapters/pin_sync.ts";
import { LwwStore } from "../../../lib/mesh/store/lww_store.ts";
import { StoreSync } from "../../../lib/mesh/store/store_sync.ts";
import { ManualPolicy } from "../../../lib/policies/manual.ts";
import { stickyMapKey } from "../../../lib/policies/sticky_map.ts";
import type { Policy } from "../../../lib/policies/policy.ts";
import { PolicyReplicas } from "../../../lib/policies/replicas.ts";
import { createPolicy } from "../../../lib/policies/factory.ts";
import { Cluster } from "../../../support/mesh_cluster.ts";
import { request, view } from "../../../support/policies.ts";

const WORKERS = Array.from({ length: 8 }, (_, i) => view(`p${i}`));

async function mesh(
  n: number,
  make: (deps: ConstructorParameters<typeof ManualPolicy>[0]) => Policy,
) {
  const c = new Cluster();
  const names = await c.grow(n);
  const routers = new Map<string, { policy: Policy; store: LwwStore; pins: PinSync }>();
  const stops: (() => void)[] = [];
  for (const [i, name] of names.entries()) {
    const node = c.nodes.get(name)!.node;
    const replicas = new PolicyReplicas();
    const config = defaultConfig();
    config.routingKeyOverride = true;
    const policy = make({
      random: seededRandom(i * 13 + 1),
      now: () => c.clock.now(),
      log: silentLogger,
      config,
      replicas,
    });
    replicas.mainFor = () => policy;
    const store = new LwwStore(`${name}#1`, { namespaces: new Set([PINS_NS]) });
    const sync = new StoreSync({
      store,
      clock: c.clock,
      log: silentLogger,
      random: seededRandom(i),
    });
    node.streams.onPeer((p, open) => sync.peerChanged(p, open));
    node.streams.onEnvelope((p, t, b) => sync.onEnvelope(p, t, b));
    sync.attach(node.streams);
    const pins = new PinSync({
      replicas,
      store,
      clock: c.clock,
      log: silentLogger,
      maxIdleMs: config.manual.maxIdleSecs * 1000,
    });
    stops.push(() => (sync.stop(), pins.stop()));
    routers.set(name, { policy, store, pins });
  }
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.clock.advance(3000);
  const pick = (name: string, key: string, workers = WORKERS) =>
    routers.get(name)!.policy.select(workers, request("hi", { stickyKey: key }))!.url;
  const stop = async () => {
    for (const s of stops) s();
    await c.stop();
  };
  return { c, names, routers, pick, stop };
}

Deno.test("pin sync: a manual key pinned on one router routes to the same worker on every router", async () => {
  const { c, names, pick, stop } = await mesh(3, (d) => new ManualPolicy(d));
  const keys = Array.from({ length: 20 }, (_, i) => `user-${i}`);
  const first = keys.map((k) => pick("r0", k));
  assert.ok(new Set(first).size > 1, "random assignment spread the keys");
  c.clock.advance(500);
  for (const name of names.slice(1)) {
    assert.deepEqual(keys.map((k) => pick(name, k)), first, name);
  }
  await stop();
});

Deno.test("pin sync: sticky-session pins are shared too", async () => {
  const { c, routers, pick, stop } = await mesh(2, (d) => createPolicy("round_robin", d));
  const keys = Array.from({ length: 10 }, (_, i) => `conv-${i}`);
  const first = keys.map((k) => pick("r0", k));
  c.clock.advance(500);
  // r1's round robin is three steps further on: on its own it would assign other workers.
  for (let i = 0; i < 3; i++) routers.get("r1")!.policy.select(WORKERS, request("unkeyed"));
  assert.deepEqual(keys.map((k) => pick("r1", k)), first);
  await stop();
});

Deno.test("pin sync: conflicting pins made on both sides of a partition agree after the heal", async () => {
  const { c, names, pick, stop } = await mesh(4, (d) => new ManualPolicy(d));
  const addr = (n: string) => c.nodes.get(n)!.address;
  c.net.partition(names.slice(0, 2).map(addr), names.slice(2).map(addr));
  c.clock.advance(15_000);
  // Each side pins the same keys, on workers the other side does not offer.
  const keys = Array.from({ length: 10 }, (_, i) => `shared-${i}`);
  for (const k of keys) pick("r0", k, WORKERS.slice(0, 4));
  for (const k of keys) pick("r3", k, WORKERS.slice(4));
  c.clock.advance(2000);
  c.net.heal();
  assert.notEqual(c.waitFor(() => c.converged(), 120_000, 100), null);
  c.clock.advance(10_000);
  for (const k of keys) {
    const chosen = names.map((n) => pick(n, k));
    assert.equal(new Set(chosen).size, 1, `${k}: ${chosen.join(" ")}`);
  }
  await stop();
});

Deno.test("pin sync: a malformed pin from a peer is ignored", async () => {
  const { routers, pick, stop } = await mesh(1, (d) => new ManualPolicy(d));
  const { store } = routers.get("r0")!;
  const bytes = (s: string) => new TextEncoder().encode(s);
  const before = pick("r0", "k");
  for (const bad of ["not json", "[1,2]", '{"a":1}']) {
    store.apply(
      { ns: PINS_NS, key: "manual:1:mk", value: bytes(bad), clock: 100, replica: "x" },
      0,
    );
  }
  store.apply(
    { ns: PINS_NS, key: "nosuchscope:k", value: bytes("[]"), clock: 101, replica: "x" },
    0,
  );
  assert.equal(pick("r0", "k"), before);
  await stop();
});

Deno.test("pin sync: a pin idle everywhere leaves the store; one still used somewhere stays", async () => {
  const { c, names, routers, pick, stop } = await mesh(3, (d) => new ManualPolicy(d));
  const idleMs = defaultConfig().manual.maxIdleSecs * 1000;
  pick("r0", "idle");
  pick("r0", "busy");
  c.clock.advance(1000);
  const stored = (n: string, k: string) =>
    routers.get(n)!.store.get(PINS_NS, `manual:${stickyMapKey("m", k)}`);
  for (const n of names) assert.ok(stored(n, "idle") && stored(n, "busy"), n);
  // r2 keeps using "busy": its stored copy is refreshed every half idle time.
  for (let t = 0; t < 5; t++) {
    c.clock.advance(idleMs / 4);
    pick("r2", "busy");
  }
  c.clock.advance(1000);
  for (const n of names) routers.get(n)!.pins.expire();
  c.clock.advance(2000);
  for (const n of names) {
    assert.equal(stored(n, "idle"), undefined, `${n}: idle pin removed`);
    assert.ok(stored(n, "busy"), `${n}: busy pin kept`);
  }
  await stop();
});

Deno.test("pin sync: a PD leg's pins go to that leg's maps only", () => {
  const replicas = new PolicyReplicas();
  const config = defaultConfig();
  const deps = (role: "prefill" | "decode") => ({
    random: seededRandom(5),
    now: () => 0,
    log: silentLogger,
    config,
    replicas,
    role,
  });
  const prefill = new ManualPolicy(deps("prefill"));
  const decode = new ManualPolicy(deps("decode"));
  const store = new LwwStore("r#1", { namespaces: new Set([PINS_NS]) });
  const clock = { now: () => 0, after: () => () => {} };
  const pins = new PinSync({ replicas, store, clock: clock, log: silentLogger, maxIdleMs: 0 });
  const key = stickyMapKey("m", "conv");
  const value = new TextEncoder().encode(JSON.stringify([WORKERS[3].url]));
  store.apply({ ns: PINS_NS, key: `manual.prefill:${key}`, value, clock: 1, replica: "x" }, 0);
  assert.equal(prefill.size, 1);
  assert.equal(decode.size, 0);
  assert.equal(prefill.select(WORKERS, request("hi", { stickyKey: "conv" }))?.url, WORKERS[3].url);
  // A leg's own pin is published under its scope.
  decode.select(WORKERS, request("hi", { stickyKey: "other" }));
  assert.ok(store.get(PINS_NS, `manual.decode:${stickyMapKey("m", "other")}`));
  pins.stop();
});
