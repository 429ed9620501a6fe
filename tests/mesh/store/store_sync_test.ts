/** Store replication over real sync streams of an in-memory mesh, under fake time. */

import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { LwwStore } from "../../../lib/mesh/store/lww_store.ts";
import { bucketOf, summary } from "../../../lib/mesh/store/anti_entropy.ts";
import { StoreSync } from "../../../lib/mesh/store/store_sync.ts";
import { Cluster } from "../../../support/mesh_cluster.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

/** A store per router, replicated through that router's streams. */
function withStores(c: Cluster, graceMs?: number) {
  const stores = new Map<string, LwwStore>();
  const syncs: StoreSync[] = [];
  const attach = (name: string, before?: (s: LwwStore) => void) => {
    const node = c.nodes.get(name)!.node;
    const store = new LwwStore(`${name}#${stores.size}`);
    before?.(store);
    const sync = new StoreSync({
      store,
      clock: c.clock,
      log: silentLogger,
      random: seededRandom(stores.size),
      tombstoneGraceMs: graceMs,
      members: () => node.members().flatMap((m) => (m.name === name ? [] : [m.name])),
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

async function mesh(n: number, graceMs?: number) {
  const c = new Cluster();
  const names = await c.grow(n);
  const s = withStores(c, graceMs);
  for (const name of names) s.attach(name);
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.clock.advance(3000); // streams open
  return { c, names, ...s };
}

Deno.test("store sync: a write on any router reaches every router within a second", async () => {
  const { c, names, stores, same, stop } = await mesh(5);
  for (const [i, name] of names.entries()) {
    stores.get(name)!.write("workers", `w${i}`, bytes(name), c.clock.now());
  }
  const t = c.waitFor(
    () => names.every((n) => stores.get(n)!.counts().get("workers")?.live === 5),
    10_000,
    10,
  );
  assert.ok(t !== null && t < 1000, `converged after ${t} ms`);
  assert.ok(same());
  // A removal reaches everyone too.
  stores.get("r2")!.write("workers", "w0", null, c.clock.now());
  c.waitFor(() => names.every((n) => stores.get(n)!.get("workers", "w0") === undefined), 5000);
  assert.ok(same());
  stop();
  await c.stop();
});

Deno.test("store sync: a router that joins after 10,000 writes catches up by anti-entropy", async () => {
  const { c, stores, attach, same, stop } = await mesh(3);
  const a = stores.get("r0")!;
  for (let i = 0; i < 10_000; i++) a.write("pins", `k${i}`, bytes(String(i)), c.clock.now());
  c.clock.advance(3000);
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
  c.clock.advance(15_000);
  stores.get("r0")!.write("pins", "conv-1", bytes("left"), c.clock.now());
  stores.get("r4")!.write("pins", "conv-1", bytes("right"), c.clock.now());
  stores.get("r3")!.write("pins", "conv-2", bytes("right only"), c.clock.now());
  c.clock.advance(5000);
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
  stores.get("r0")!.write("workers", "w", bytes("v"), c.clock.now());
  const t = c.waitFor(() => stores.get(names[1])!.get("workers", "w") !== undefined, 20_000, 10);
  assert.notEqual(t, null);
  stop();
  await c.stop();
});

Deno.test("store sync: a removal's tombstone is collected everywhere once every member holds it", async () => {
  const { c, names, stores, stop } = await mesh(3, 60_000);
  stores.get("r0")!.write("workers", "w", bytes("v"), c.clock.now());
  c.clock.advance(2000);
  stores.get("r0")!.write("workers", "w", null, c.clock.now());
  c.clock.advance(2000);
  for (const n of names) {
    assert.deepEqual(stores.get(n)!.counts().get("workers"), { live: 0, tombstones: 1 });
  }
  // Grace (60 s) plus anti-entropy rounds (30 s) that prove every peer holds it.
  const t = c.waitFor(
    () => names.every((n) => stores.get(n)!.counts().get("workers")!.tombstones === 0),
    300_000,
    1000,
  );
  assert.notEqual(t, null, "collected on every router");
  // A late copy of the old live value is refused, not resurrected.
  const late = { ns: "workers", key: "w", value: bytes("v"), clock: 1, replica: "r0#0" };
  assert.equal(stores.get("r1")!.apply(late, c.clock.now()), "collected");
  stop();
  await c.stop();
});

/** r3 holds "gone" and is cut off; r0 removes it; r3 is forgotten and the removal collected. */
async function missedRemoval() {
  const m = await mesh(4, 60_000);
  const { c, names, stores } = m;
  const addr = (n: string) => c.nodes.get(n)!.address;
  stores.get("r0")!.write("workers", "gone", bytes("v"), c.clock.now());
  stores.get("r3")!.write("workers", "mine", bytes("r3's"), c.clock.now());
  c.clock.advance(3000);
  assert.equal(new TextDecoder().decode(stores.get("r3")!.get("workers", "gone")), "v");
  c.net.partition([addr("r3")], names.slice(0, 3).map(addr));
  c.clock.advance(5000);
  for (let i = 0; i < 5; i++) stores.get("r1")!.write("workers", `busy${i}`, bytes("x"), 0);
  stores.get("r0")!.write("workers", "gone", null, c.clock.now());
  // Meanwhile r3 writes a key of its own, at a clock below the others' by now.
  stores.get("r3")!.write("workers", "while-apart", bytes("new"), c.clock.now());
  const t = c.waitFor(
    () => names.slice(0, 3).every((n) => stores.get(n)!.counts().get("workers")!.tombstones === 0),
    1_200_000,
    1000,
  );
  assert.notEqual(t, null, "collected while r3 was away");
  return m;
}

/** Heals, waits for the mesh, and checks what every router holds afterwards. */
async function healAndCheck(m: Awaited<ReturnType<typeof mesh>>, r3KeepsStale: boolean) {
  const { c, names, stores, stop } = m;
  c.net.heal();
  assert.notEqual(c.waitFor(() => c.converged(), 1_200_000, 100), null);
  c.clock.advance(70_000); // streams open, anti-entropy, acks, rewrites
  const text = (n: string, k: string) => {
    const v = stores.get(n)!.get("workers", k);
    return v === undefined ? undefined : new TextDecoder().decode(v);
  };
  for (const n of names.slice(0, 3)) {
    assert.equal(text(n, "gone"), undefined, `${n}: not resurrected`);
  }
  assert.equal(text("r3", "gone"), r3KeepsStale ? "v" : undefined, "r3's stale copy");
  for (const n of names) {
    assert.equal(text(n, "mine"), "r3's", n);
    // r3's write from while apart reached everyone (rewritten past the horizon if refused).
    assert.equal(text(n, "while-apart"), "new", n);
  }
  stop();
  await c.stop();
}

Deno.test("store sync: a router that missed a collected removal drops its copy when it returns", async () => {
  const m = await missedRemoval();
  assert.equal(m.stores.get("r0")!.horizon("workers"), 0, "the collected version is remembered");
  await healAndCheck(m, false);
});

Deno.test("store sync: much later, below the horizon, a stale copy stays on its router alone; new writes are rewritten", async () => {
  const m = await missedRemoval();
  const t = m.c.waitFor(
    () => m.names.slice(0, 3).every((n) => m.stores.get(n)!.horizon("workers") > 0),
    600_000,
    1000,
  );
  assert.notEqual(t, null);
  await healAndCheck(m, true);
  const e = m.stores.get("r0")!.entry("workers", "while-apart")!;
  assert.ok(e.clock > m.stores.get("r0")!.horizon("workers"), "rewritten past the horizon");
});

Deno.test("store sync: a tombstone that arrives after its peers collected it is dropped, not stuck", async () => {
  const { c, names, stores, attach, stop } = await mesh(3, 60_000);
  const r0 = stores.get("r0")!;
  r0.write("workers", "w", bytes("v"), c.clock.now());
  c.clock.advance(2000);
  r0.write("workers", "w", null, c.clock.now());
  const t = { ...r0.entry("workers", "w")! };
  assert.notEqual(
    c.waitFor(
      () => names.every((n) => stores.get(n)!.counts().get("workers")!.tombstones === 0),
      300_000,
      1000,
    ),
    null,
  );
  // A router that copied the tombstone from a peer before that peer collected it.
  await c.add("late", ["r1"]);
  const late = attach("late", (s) => s.apply({ ...t }, c.clock.now()));
  // Another key of the same bucket, removed afterwards, must still be collected everywhere.
  const b = bucketOf("workers\u0000w");
  let k2 = "";
  for (let i = 0; !k2; i++) if (bucketOf(`workers\u0000x${i}`) === b) k2 = `x${i}`;
  c.clock.advance(5000);
  r0.write("workers", k2, bytes("v"), c.clock.now());
  c.clock.advance(2000);
  r0.write("workers", k2, null, c.clock.now());
  const all = [...names, "late"];
  assert.notEqual(
    c.waitFor(
      () => all.every((n) => stores.get(n)!.counts().get("workers")!.tombstones === 0),
      1_800_000,
      1000,
    ),
    null,
    all.map((n) => `${n}: ${stores.get(n)!.counts().get("workers")!.tombstones}`).join(" "),
  );
  assert.equal(late.entry("workers", "w"), undefined);
  stop();
  await c.stop();
});
