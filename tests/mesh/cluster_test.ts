/** In-memory clusters under fake time: membership as a user of the mesh would notice it. */

import assert from "node:assert/strict";
import { Cluster } from "../../support/mesh_cluster.ts";

async function cluster(n: number, opts: ConstructorParameters<typeof Cluster>[0] = {}) {
  const c = new Cluster(opts);
  const names = await c.grow(n);
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null, "the cluster forms");
  return { c, names };
}

/** Every pair keeps exactly one stream, counted by the acceptor with peer != "". */
function streamCount(c: Cluster): number {
  let n = 0;
  for (const x of c.live()) {
    for (const v of x.metrics.peerConnections.get().values) {
      if (v.labels.peer !== "" && v.value === 1) n++;
    }
  }
  return n;
}

Deno.test("cluster: 5 routers form a full mesh with one stream per pair", async () => {
  const { c } = await cluster(5);
  c.clock.advance(3000);
  assert.equal(streamCount(c), 10);
  for (const x of c.live()) assert.equal(x.node.streams.openPeers().length, 4);
  await c.stop();
});

Deno.test("cluster: a crash is suspected within a second and DOWN everywhere in about 4 s", async () => {
  const { c } = await cluster(5);
  c.clock.advance(3000);
  await c.kill("r3");
  const suspected = c.waitFor(
    () => c.live().some((x) => c.statusOf(x.name, "r3") === "SUSPECTED"),
    10_000,
    1,
  );
  assert.ok(suspected !== null && suspected < 1000, `first SUSPECTED after ${suspected} ms`);
  const down = c.waitFor(() => c.allSee("r3", "DOWN"), 30_000, 10);
  assert.ok(down !== null && down <= 6000, `DOWN everywhere after ${down} ms`);
  c.clock.advance(2000);
  assert.equal(streamCount(c), 6, "the dead router's streams are gone");
  // r4 accepted r3's stream (r3 < r4): its series drops to 0 and stays after r3 is forgotten;
  // the peer="" series set at accept stays 1, as SMG's does.
  const gauge = (n: string) =>
    Object.fromEntries(
      c.nodes.get(n)!.metrics.peerConnections.get().values.map((v) => [v.labels.peer, v.value]),
    );
  assert.equal(gauge("r4").r3, 0);
  assert.equal(gauge("r4")[""], 1);

  // It restarts with the same name and rejoins.
  await c.restart("r3", ["r1"]);
  assert.notEqual(c.waitFor(() => c.converged(), 10_000), null, "rejoined");
  assert.ok(c.nodes.get("r0")!.node.members().find((m) => m.name === "r3")!.incarnation > 1);
  c.clock.advance(5000);
  assert.equal(streamCount(c), 10);
  await c.stop();
});

Deno.test("cluster: 50 routers detect a crash and nobody else is suspected", async () => {
  const { c } = await cluster(50);
  await c.kill("r17");
  const down = c.waitFor(() => c.allSee("r17", "DOWN"), 60_000, 50);
  assert.notEqual(down, null);
  for (const x of c.live()) {
    for (const m of x.node.members()) {
      if (m.name !== "r17") assert.equal(m.status, "ALIVE", `${x.name} sees ${m.name}`);
    }
  }
  await c.stop();
});

Deno.test("cluster: a graceful leave is LEAVING everywhere and nobody suspects it", async () => {
  const { c } = await cluster(5);
  c.clock.advance(2000);
  const leaver = c.nodes.get("r2")!;
  const left = leaver.node.leave();
  assert.notEqual(c.waitFor(() => c.allSee("r2", "LEAVING"), 5000, 1), null);
  c.clock.advance(3000); // the leaver waits for its announcements to be acked (3 s at most)
  await left;
  await c.kill("r2");
  c.clock.advance(20_000);
  assert.ok(c.allSee("r2", "LEAVING"));
  // r3 accepted r2's stream; its series is 0 now and stays 0 after r2 is forgotten.
  const r3 = () =>
    c.nodes.get("r3")!.metrics.peerConnections.get().values.find((v) => v.labels.peer === "r2");
  assert.equal(r3()?.value, 0);
  c.clock.advance(300_000);
  assert.equal(c.statusOf("r3", "r2"), null, "LEAVING members are reaped");
  assert.equal(r3()?.value, 0);
  for (const x of c.live()) {
    assert.equal(x.metrics.suspicions.get().values.reduce((a, v) => a + v.value, 0), 0);
  }
  await c.stop();
});

Deno.test("cluster: a partition marks the other side DOWN; healed, the halves merge", async () => {
  const { c, names } = await cluster(5);
  const a = names.slice(0, 2);
  const b = names.slice(2);
  c.net.partition(
    c.live().filter((x) => a.includes(x.name)).map((x) => x.address),
    c.live().filter((x) => b.includes(x.name)).map((x) => x.address),
  );
  const split = c.waitFor(
    () =>
      a.every((x) => b.every((y) => c.statusOf(x, y) === "DOWN" && c.statusOf(y, x) === "DOWN")),
    60_000,
    50,
  );
  assert.notEqual(split, null, "each side sees the other DOWN");
  c.net.heal();
  const merged = c.waitFor(() => c.converged(), 60_000, 50);
  assert.notEqual(merged, null, "merged after the heal");
  await c.stop();
});

Deno.test("cluster: A cannot reach C but B can: ping-req keeps C ALIVE", async () => {
  const { c } = await cluster(5);
  const addr = (n: string) => c.nodes.get(n)!.address;
  c.net.block(addr("r0"), addr("r2"));
  c.net.block(addr("r2"), addr("r0"));
  c.clock.advance(60_000);
  assert.ok(c.converged(), "everyone still ALIVE everywhere");
  const r0 = c.nodes.get("r0")!.metrics;
  const indirect = r0.probes.get().values.find((v) => v.labels.result === "indirect_ack")?.value ??
    0;
  assert.ok(indirect > 0, "r0 reached r2 through others");
  await c.stop();
});

Deno.test("cluster: 10 % message loss for ten minutes brings no false DOWN", async () => {
  const { c } = await cluster(5, { seed: 3 });
  c.net.loss = 0.1;
  let falseDown = 0;
  for (let t = 0; t < 600; t++) {
    c.clock.advance(1000);
    for (const x of c.live()) {
      for (const m of x.node.members()) if (m.status === "DOWN") falseDown++;
    }
  }
  assert.equal(falseDown, 0);
  await c.stop();
});

Deno.test("cluster: a slow router does not get healthy peers declared DOWN", async () => {
  const { c } = await cluster(5);
  const slow = c.nodes.get("r1")!;
  c.net.slow(slow.address, 700); // 1.4 s round trips from and to it: past every probe timeout
  let downs = 0;
  for (let t = 0; t < 120; t++) {
    c.clock.advance(1000);
    for (const x of c.live()) for (const m of x.node.members()) if (m.status === "DOWN") downs++;
  }
  assert.equal(downs, 0, "nobody DOWN, the slow router included");
  assert.ok(slow.node.localHealth > 0, "the slow router knows it is the slow one");
  await c.stop();
});

Deno.test("cluster: a router joins through any member", async () => {
  const { c } = await cluster(4);
  await c.add("late", ["r3"]);
  assert.notEqual(c.waitFor(() => c.converged(), 5000), null);
  await c.stop();
});

Deno.test("cluster: a second router with a taken name is refused and changes nothing", async () => {
  const { c } = await cluster(3);
  const before = c.nodes.get("r0")!.node.members().find((m) => m.name === "r1")!;
  const intruder = await c.add("r1", ["r2"], "elsewhere:7946");
  c.clock.advance(10_000);
  assert.equal(intruder.node.status, "INIT", "it never joined");
  for (const name of ["r0", "r2"]) {
    const m = c.nodes.get(name)!.node.members().find((x) => x.name === "r1")!;
    assert.equal(m.address, before.address);
    assert.equal(m.status, "ALIVE");
  }
  const refused = c.nodes.get("r2")!.metrics.rejected.get().values.find((v) =>
    v.labels.reason === "name_conflict"
  );
  assert.ok((refused?.value ?? 0) > 0);
  await intruder.node.stop();
  await c.stop();
});

Deno.test("cluster: a partition longer than the reap interval still heals", async () => {
  for (const split of [1, 2]) {
    const { c, names } = await cluster(5);
    const addr = (n: string) => c.nodes.get(n)!.address;
    const a = names.slice(0, split);
    const b = names.slice(split);
    c.net.partition(a.map(addr), b.map(addr));
    c.clock.advance(400_000); // past the 300 s reap: each side has forgotten the other
    assert.equal(c.statusOf(a[0], b[0]), null, "forgotten");
    c.net.heal();
    assert.notEqual(c.waitFor(() => c.converged(), 120_000, 100), null, `split ${split}: merged`);
    await c.stop();
  }
});

Deno.test("cluster: a member listener that throws does not stop the mesh", async () => {
  const { c } = await cluster(4);
  c.nodes.get("r0")!.node.onMember(() => {
    throw new Error("listener bug");
  });
  await c.kill("r2");
  assert.notEqual(c.waitFor(() => c.allSee("r2", "DOWN"), 30_000), null);
  await c.stop();
});
