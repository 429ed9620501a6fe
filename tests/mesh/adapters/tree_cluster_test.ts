/**
 * Cache-aware tree sync over the real sync streams of an in-memory mesh, under fake time: five
 * routers with message loss share their decisions; across a partition each half routes on its
 * own, and after the heal (repair on the reopened streams) every router sends each
 * conversation's next turn where it went before; a router that joins after 10,000 decisions
 * copies them at once; and the feedback trim over three routers: one router's correction makes
 * the others forget the worker's stale branch, and repairs from a router that missed it do not
 * bring it back.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { SelectionNote, WorkerView } from "../../../lib/core/types.ts";
import { type TreeCounter, TreeSync } from "../../../lib/mesh/adapters/tree_sync.ts";
import { CacheAwarePolicy } from "../../../lib/policies/cache_aware/cache_aware.ts";
import { PolicyReplicas } from "../../../lib/policies/replicas.ts";
import { Cluster } from "../../../support/mesh_cluster.ts";
import { believed } from "../../support/beliefs.ts";
import { request, view } from "../../../support/policies.ts";

const WORKERS = Array.from({ length: 6 }, (_, i) => view(`u${i}`));
const conversation = (i: number) =>
  `tenant ${i % 5} system prompt: answer in one line. `.repeat(3) + `question ${i}, `.repeat(8);

async function mesh(n: number) {
  const c = new Cluster();
  const names = await c.grow(n);
  const routers = new Map<
    string,
    { policy: CacheAwarePolicy; sync: TreeSync; counts: Map<TreeCounter, number> }
  >();
  const attach = (name: string) => {
    const i = routers.size;
    const node = c.nodes.get(name)!.node;
    const replicas = new PolicyReplicas();
    // What is shared is under test, not the load: no recent-work term (it is per router, and
    // would move short conversations off a worker this router alone sent much).
    const config = defaultConfig();
    config.cacheAware.workWeight = 0;
    const policy = new CacheAwarePolicy({
      random: seededRandom(i + 1),
      now: () => c.clock.now(),
      log: silentLogger,
      config,
      replicas,
    });
    replicas.mainFor = () => policy;
    const counts = new Map<TreeCounter, number>();
    const sync = new TreeSync({
      replicas,
      clock: c.clock,
      log: silentLogger,
      random: seededRandom(50 + i),
      name,
      count: (what, n) => counts.set(what, (counts.get(what) ?? 0) + n),
    });
    node.streams.onPeer((p, open) => sync.peerChanged(p, open));
    node.streams.onEnvelope((p, t, b) => sync.onEnvelope(p, t, b));
    sync.attach(node.streams);
    routers.set(name, { policy, sync, counts });
  };
  for (const name of names) attach(name);
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.clock.advance(3000); // streams open
  const route = (name: string, from: number, count: number) => {
    const picks = new Map<number, string>();
    for (let i = from; i < from + count; i++) {
      const ws: WorkerView[] = WORKERS.map((w, j) => ({ ...w, inFlight: (i * 7 + j) % 6 }));
      picks.set(i, routers.get(name)!.policy.select(ws, request(conversation(i)))!.url);
    }
    return picks;
  };
  const nextTurn = (name: string, i: number) =>
    routers.get(name)!.policy.select(WORKERS, request(conversation(i) + " ok. and then?"))!.url;
  const stop = async () => {
    for (const r of routers.values()) r.sync.stop();
    await c.stop();
  };
  return { c, names, route, nextTurn, stop, attach, routers };
}

Deno.test("tree cluster: five routers under 10 % loss route each conversation's next turn to its worker", async () => {
  const { c, names, route, nextTurn, stop } = await mesh(5);
  c.net.loss = 0.1;
  const picks = new Map<number, string>();
  for (const [k, name] of names.entries()) {
    for (const [i, url] of route(name, k * 40, 40)) picks.set(i, url);
  }
  c.clock.advance(5000);
  for (const name of names) {
    for (const [i, url] of picks) {
      assert.equal(nextTurn(name, i), url, `${name}: conversation ${i}`);
    }
  }
  await stop();
});

Deno.test("tree cluster: decisions made on both sides of a partition reach everyone after the heal", async () => {
  const { c, names, route, nextTurn, stop } = await mesh(5);
  const addr = (n: string) => c.nodes.get(n)!.address;
  c.net.partition(names.slice(0, 2).map(addr), names.slice(2).map(addr));
  c.clock.advance(15_000);
  const left = route("r0", 0, 60);
  const right = route("r4", 1000, 60);
  c.clock.advance(5000);
  c.net.heal();
  assert.notEqual(c.waitFor(() => c.converged(), 120_000, 100), null);
  c.clock.advance(3000);
  // The next decisions on each side name paths the other side lacks: repairs follow.
  route("r1", 2000, 1);
  route("r3", 3000, 1);
  c.clock.advance(10_000);
  for (const name of names) {
    for (const [i, url] of [...left, ...right]) {
      assert.equal(nextTurn(name, i), url, `${name}: conversation ${i}`);
    }
  }
  await stop();
});

Deno.test("tree cluster: a router that joins after 10,000 decisions routes their next turns like the others", async () => {
  const { c, route, nextTurn, stop, attach, routers } = await mesh(3);
  const picks = route("r0", 0, 10_000);
  c.clock.advance(2000);
  await c.add("late", ["r1"]);
  attach("late");
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.clock.advance(10_000);
  for (const i of [0, 1, 2, 500, 4321, 7777, 9998, 9999]) {
    assert.equal(nextTurn("late", i), picks.get(i), `conversation ${i}`);
  }
  assert.equal(routers.get("late")!.sync.repairing, 0);
  await stop();
});

Deno.test("tree cluster: the feedback trim over three routers: one router's correction makes the others forget the worker's stale branch, and a repair from a router that missed it does not bring it back", async () => {
  const { c, routers, stop } = await mesh(3);
  const [a, b, r2] = ["r0", "r1", "r2"].map((n) => routers.get(n)!);
  const W = WORKERS[0];
  const system = (k: number) => `tenant ${k} system prompt, kept by every turn. `.repeat(8);
  const turn = (k: number, q: string) => system(k) + `${q}: a question of its own, `.repeat(6);
  const send = (r: typeof a, text: string) => {
    const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
    r.policy.select([W], request(text), note);
    return note;
  };
  /** `r` routes `text` to W, whose answer says it held only half the system prompt. */
  const evicted = (r: typeof a, k: number, text: string) => {
    const note = send(r, text);
    note.onReport!({ prompt: text.length / 4, cached: system(k).length / 8 });
  };
  const believes = (r: typeof a, text: string) => believed(r.policy.shared, "m", text, W.url);
  const all = [a, b, r2];
  // Conversations under two system prompts, through every router, all on W.
  send(a, turn(1, "x"));
  send(b, turn(1, "y"));
  send(a, turn(2, "u"));
  send(r2, turn(2, "v"));
  c.clock.advance(5000);
  for (const r of all) {
    for (const t of [turn(1, "x"), turn(1, "y"), turn(2, "u"), turn(2, "v")]) {
      assert.ok(believes(r, t) > system(1).length, "everyone believes W holds every turn");
    }
  }

  // 1. Everyone connected: r0 learns that W evicted most of prompt 1; r1 and r2 follow.
  evicted(a, 1, turn(1, "z"));
  c.clock.advance(3000);
  for (const r of all) {
    for (const t of [turn(1, "x"), turn(1, "y")]) {
      assert.ok(believes(r, t) <= system(1).length, `${t.slice(-30)}: forgotten`);
    }
    assert.ok(believes(r, turn(2, "u")) > system(2).length, "prompt 2 untouched");
  }
  for (const r of [b, r2]) assert.ok((r.counts.get("corrections_received") ?? 0) >= 1);

  // 2. r2 is cut off while r0 learns the same of prompt 2: r1 follows at once, r2 still believes.
  const addr = (n: string) => c.nodes.get(n)!.address;
  c.net.partition([addr("r0"), addr("r1")], [addr("r2")]);
  c.clock.advance(15_000);
  evicted(a, 2, turn(2, "w"));
  c.clock.advance(3000);
  assert.ok(believes(b, turn(2, "v")) <= system(2).length);
  assert.ok(believes(r2, turn(2, "v")) > system(2).length, "r2 missed it");
  const repairs = (r: typeof a) => r.counts.get("repairs_finished") ?? 0;
  const before = all.map(repairs);
  c.net.heal();
  assert.notEqual(c.waitFor(() => c.converged(), 120_000, 100), null);
  c.clock.advance(3000);
  // New decisions on each side name paths the other lacks: each copies the other's trees.
  send(a, turn(3, "new on r0"));
  send(r2, turn(3, "new on r2"));
  c.clock.advance(10_000);
  for (const [i, r] of all.entries()) assert.ok(repairs(r) > before[i], "repaired after the heal");
  for (const r of all) {
    for (const t of [turn(2, "u"), turn(2, "v"), turn(1, "x"), turn(1, "y")]) {
      assert.ok(believes(r, t) <= system(2).length, `${t.slice(-30)}: still forgotten`);
    }
    assert.equal(r.sync.repairing, 0);
  }
  // What each predicts for W's next turn of y: only what W still holds.
  for (const r of all) {
    assert.ok(send(r, turn(1, "y") + " and then?").predictedCached! <= system(1).length / 4);
  }
  await stop();
});
