/** Store replication over real sync streams of an in-memory mesh, under fake time. */

import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { LwwStore } from "../../../lib/mesh/store/lww_store.ts";
import { StoreSync, summary } from "../../../lib/mesh/store/store_sync.ts";
import { Cluster } from "../../../bench/mesh/cluster.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

/** A store per router, replicated through that router's streams. */
function withStores(c: Cluster) {
  const stores = new Map<string, LwwStore>();
  const syncs: StoreSync[] = [];
  const attach = (name: string) => {
    const node = c.nodes.get(name)!.node;
    const store = new LwwStore(`${name}#${stores.size}`);
    const sync = new StoreSync({
      store,
      scheduler: c.sched,
      log: silentLogger,
      random: seededRandom(stores.size),
    });
    node.streams.onPeer((p, open) => sync.peerChanged(p, open));
    node.streams.onEnvelope((p, t, b) => sync.onEnvelope(p, t, b));
    sync.attach({
      send: (p, t, b) => node.streams.send(p, t, b),
      openPeers: () => node.streams.openPeers(),
    });
    stores.set(name, store);
    syncs.push(sync);
    return store;
  };
  const same = () => {
    const all = [...stores.values()].map((s) => summary(s).join(","));
    return all.every((x) => x === all[0]);
  };
  const stop = () => syncs.forEach((s) => s.stop());
  return { stores, attach, same, stop };
}

async function mesh(n: number) {
  const c = new Cluster();
  const names = await c.grow(n);
  const s = withStores(c);
  for (const name of names) s.attach(name);
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.sched.advance(3000); // streams open
  return { c, names, ...s };
}

Deno.test("store sync: a write on any router reaches every router within a second", async () => {
  const { c, names, stores, same, stop } = await mesh(5);
  for (const [i, name] of names.entries()) {
    stores.get(name)!.write("workers", `w${i}`, bytes(name), c.sched.now());
  }
  const t = c.waitFor(
    () => names.every((n) => stores.get(n)!.counts().get("workers")?.live === 5),
    10_000,
    10,
  );
  assert.ok(t !== null && t < 1000, `converged after ${t} ms`);
  assert.ok(same());
  // A removal reaches everyone too.
  stores.get("r2")!.write("workers", "w0", null, c.sched.now());
  c.waitFor(() => names.every((n) => stores.get(n)!.get("workers", "w0") === undefined), 5000);
  assert.ok(same());
  stop();
  await c.stop();
});

Deno.test("store sync: a router that joins after 10,000 writes catches up by anti-entropy", async () => {
  const { c, stores, attach, same, stop } = await mesh(3);
  const a = stores.get("r0")!;
  for (let i = 0; i < 10_000; i++) a.write("pins", `k${i}`, bytes(String(i)), c.sched.now());
  c.sched.advance(3000);
  await c.add("late", ["r1"]);
  const late = attach("late");
  const t = c.waitFor(() => late.counts().get("pins")?.live === 10_000, 30_000, 10);
  assert.notEqual(t, null, "caught up");
  assert.ok(same());
  stop();
  await c.stop();
});

Deno.test("store sync: writes on both sides of a partition converge after the heal", async () => {
  const { c, names, stores, same, stop } = await mesh(5);
  const addr = (n: string) => c.nodes.get(n)!.address;
  c.net.partition(names.slice(0, 2).map(addr), names.slice(2).map(addr));
  c.sched.advance(15_000);
  stores.get("r0")!.write("pins", "conv-1", bytes("left"), c.sched.now());
  stores.get("r4")!.write("pins", "conv-1", bytes("right"), c.sched.now());
  stores.get("r3")!.write("pins", "conv-2", bytes("right only"), c.sched.now());
  c.sched.advance(5000);
  assert.ok(!same());
  c.net.heal();
  assert.notEqual(c.waitFor(() => c.converged() && same(), 120_000, 100), null);
  const winner = new TextDecoder().decode(stores.get("r1")!.get("pins", "conv-1"));
  for (const n of names) {
    assert.equal(new TextDecoder().decode(stores.get(n)!.get("pins", "conv-1")), winner);
  }
  assert.equal(new TextDecoder().decode(stores.get("r0")!.get("pins", "conv-2")), "right only");
  stop();
  await c.stop();
});

Deno.test("store sync: a write whose batch was dropped is resent until acknowledged", async () => {
  const { c, names, stores, stop } = await mesh(2);
  const node = c.nodes.get("r0")!.node;
  // Drop the next envelopes r0 sends (a full stream queue would do the same).
  const real = node.streams.send.bind(node.streams);
  let drop = 3;
  node.streams.send = (p, t, b) => (t === "crdt_batch" && drop-- > 0 ? false : real(p, t, b));
  stores.get("r0")!.write("workers", "w", bytes("v"), c.sched.now());
  const t = c.waitFor(() => stores.get(names[1])!.get("workers", "w") !== undefined, 20_000, 10);
  assert.notEqual(t, null);
  stop();
  await c.stop();
});
