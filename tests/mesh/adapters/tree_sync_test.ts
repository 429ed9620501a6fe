/**
 * Cache-aware tree sync between routers linked by a fake stream port under fake time: deltas
 * once per round (applied vs unknown), repair of a late joiner (10,000 decisions, paged), no
 * repair for new decisions of a peer already copied, folding, retry to another peer after 5 s
 * without progress, failure after three retries, stale and duplicate pages, PD legs by role,
 * deltas for a model routed without cache_aware dropped, and corrections: delivered in order
 * among the deltas, relayed, and caught up by a router that missed one.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { SelectionNote, WorkerView } from "../../../lib/core/types.ts";
import { type TreeCounter, TreeSync } from "../../../lib/mesh/adapters/tree_sync.ts";
import { FakeClock } from "../../../lib/core/clock.ts";
import type { EnvelopeType } from "../../../lib/mesh/wire.ts";
import * as codec from "../../../lib/mesh/adapters/tree_codec.ts";
import { CacheAwarePolicy } from "../../../lib/policies/cache_aware/cache_aware.ts";
import { ladder, pathHashes, Placements } from "../../../lib/policies/cache_aware/shared_paths.ts";
import { PolicyReplicas, type TreeRole } from "../../../lib/policies/replicas.ts";
import { believed } from "../../support/beliefs.ts";
import { request, view } from "../../../support/policies.ts";

interface Node {
  name: string;
  policy: CacheAwarePolicy;
  sync: TreeSync;
  counts: Map<TreeCounter, number>;
  /** Envelopes this node sent, by type. */
  sent: EnvelopeType[];
}

/** Routers whose streams deliver after 1 ms; `drop` filters envelopes in flight. */
function mesh(
  names: string[],
  opts: {
    pageBytes?: number;
    role?: TreeRole;
    notCacheAware?: string;
    sliceMs?: number;
    pageEntries?: number;
    maxPathUnits?: number;
  } = {},
) {
  const clock = new FakeClock();
  const nodes = new Map<string, Node>();
  const links = new Set<string>();
  let drop: (from: string, to: string, type: EnvelopeType, payload: Uint8Array) => boolean = () =>
    false;
  let queued = 0;
  const linkKey = (a: string, b: string) => [a, b].sort().join("|");
  for (const [i, name] of names.entries()) {
    const replicas = new PolicyReplicas();
    const policy = new CacheAwarePolicy({
      random: seededRandom(i + 1),
      now: () => clock.now(),
      log: silentLogger,
      config: defaultConfig(),
      replicas,
      role: opts.role,
    });
    replicas.mainFor = () => (name === opts.notCacheAware ? null : policy);
    const counts = new Map<TreeCounter, number>();
    const sync = new TreeSync({
      replicas,
      clock: clock,
      log: silentLogger,
      random: seededRandom(100 + i),
      name,
      pageBytes: opts.pageBytes,
      sliceMs: opts.sliceMs,
      pageEntries: opts.pageEntries,
      maxPathUnits: opts.maxPathUnits,
      count: (what, n) => counts.set(what, (counts.get(what) ?? 0) + n),
    });
    const node: Node = { name, policy, sync, counts, sent: [] };
    nodes.set(name, node);
    sync.attach({
      queued: () => queued,
      openPeers: () => names.filter((p) => p !== name && links.has(linkKey(name, p))),
      send(peer, type, payload) {
        if (!links.has(linkKey(name, peer))) return false;
        node.sent.push(type);
        if (!drop(name, peer, type, payload)) {
          clock.after(1, () => nodes.get(peer)!.sync.onEnvelope(name, type, payload));
        }
        return true;
      },
    });
  }
  const link = (a: string, b: string) => {
    links.add(linkKey(a, b));
    nodes.get(a)!.sync.peerChanged(b, true);
    nodes.get(b)!.sync.peerChanged(a, true);
  };
  const unlink = (a: string, b: string) => {
    links.delete(linkKey(a, b));
    nodes.get(a)!.sync.peerChanged(b, false);
    nodes.get(b)!.sync.peerChanged(a, false);
  };
  return {
    clock,
    node: (n: string) => nodes.get(n)!,
    link,
    unlink,
    setDrop: (f: typeof drop) => (drop = f),
    setQueued: (n: number) => (queued = n),
    stop: () => {
      for (const n of nodes.values()) n.sync.stop();
    },
  };
}

const WORKERS = [view("u1"), view("u2"), view("u3"), view("u4")];
// A shared system prompt per tenant, then a user turn longer than a block (64 characters).
const conversation = (i: number) =>
  `tenant ${i % 7} system prompt: be helpful and brief. `.repeat(3) + `question ${i}, `.repeat(8);
const count = (n: Node, c: TreeCounter) => n.counts.get(c) ?? 0;

/**
 * The deltas a round carries for `picks` (conversation → worker): each path's `ladder`, a
 * (hash, worker) pair once however many decisions repeat it (a shared system prompt's rungs).
 */
const rungs = (picks: ReadonlyMap<number, string>) => {
  const pairs = new Set<string>();
  for (const [i, url] of picks) {
    const hashes = pathHashes(conversation(i), 64);
    for (const r of ladder(hashes.length)) pairs.add(`${hashes[r]} ${url}`);
  }
  return pairs.size;
};

/** Routes `n` conversations through `node`, spreading load so workers differ. */
function route(node: Node, from: number, n: number): Map<number, string> {
  const picks = new Map<number, string>();
  for (let i = from; i < from + n; i++) {
    const ws: WorkerView[] = WORKERS.map((w, j) => ({ ...w, inFlight: (i + j) % 4 }));
    picks.set(i, node.policy.select(ws, request(conversation(i)))!.url);
  }
  return picks;
}

/** The worker `node` picks for turn 2 of conversation `i` when every worker is equally busy. */
function nextTurn(node: Node, i: number): string {
  return node.policy.select(WORKERS, request(conversation(i) + " assistant: ok. user: more"))!.url;
}

Deno.test("tree sync: one delta envelope per round reaches every open peer and routes there", () => {
  const m = mesh(["a", "b", "c"]);
  m.link("a", "b");
  m.link("a", "c");
  const a = m.node("a");
  const picks = route(a, 0, 20);
  m.clock.advance(999);
  assert.deepEqual(a.sent, []);
  m.clock.advance(10);
  // One envelope per peer; b and c, which never copied a's tree, also ask for it (one page).
  assert.deepEqual(a.sent.filter((t) => t === "tree_deltas"), ["tree_deltas", "tree_deltas"]);
  const deltas = rungs(picks);
  assert.ok(deltas > 20 && deltas <= 20 * 4, `${deltas} deltas`);
  assert.equal(count(a, "deltas_sent"), 2 * deltas);
  for (const peer of ["b", "c"]) {
    const n = m.node(peer);
    assert.equal(count(n, "deltas_received"), deltas);
    for (const [i, url] of picks) assert.equal(nextTurn(n, i), url, `${peer} conversation ${i}`);
  }
  // Per routed request and peer, the deltas cost a few bytes each.
  const bytes = count(a, "delta_bytes_sent") / (2 * deltas);
  assert.ok(bytes < 16, `${bytes} B a delta`);
  m.stop();
});

Deno.test("tree sync: a router that joins after 10,000 decisions copies the tree in pages at once and routes like its peer", () => {
  const m = mesh(["a", "b"], { pageBytes: 256 * 1024 });
  const a = m.node("a");
  const b = m.node("b");
  const picks = route(a, 0, 10_000);
  m.clock.advance(1500); // a's round: nobody to tell
  m.link("a", "b"); // a announces its tree on the new stream: b copies it, no new decision needed
  assert.ok(m.clock.advanceUntil(() => count(b, "repairs_finished") === 1, 10_000));
  assert.ok(count(b, "pages_received") > 1, `${count(b, "pages_received")} pages`);
  assert.equal(count(b, "repairs_started"), 1);
  const sample = [0, 1, 777, 4321, 9999];
  for (const i of sample) assert.equal(nextTurn(b, i), picks.get(i), `conversation ${i}`);
  // New decisions afterwards are applied without another repair.
  route(a, 10_001, 50);
  m.clock.advance(1100);
  assert.equal(count(b, "repairs_started"), 1);
  assert.equal(count(b, "deltas_unknown") >= 50, true);
  m.stop();
});

Deno.test("tree sync: unknown paths fold into the repair in flight; another peer's wait their turn", () => {
  const m = mesh(["a", "b", "c"]);
  const [a, b, c] = ["a", "b", "c"].map(m.node);
  route(a, 0, 30);
  route(b, 30, 30);
  m.link("a", "c");
  m.link("b", "c");
  // a's first page is lost, so c's repair from a is still in flight for the next rounds.
  let pages = 0;
  m.setDrop((from, _to, type) => from === "a" && type === "tree_repair_page" && ++pages === 1);
  route(a, 100, 1);
  m.clock.advance(1005);
  assert.equal(count(c, "repairs_started"), 1);
  route(a, 101, 1);
  route(b, 102, 1);
  m.clock.advance(1000);
  // a's second round folds into the repair from a; b's rounds wait their turn (counted once).
  assert.equal(count(c, "repairs_folded"), 1);
  assert.equal(count(c, "repairs_queued"), 1);
  assert.equal(count(c, "repairs_started"), 1);
  // The retry goes to b (another peer); a, whose paths b need not know, is repaired after it.
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_finished") === 2, 20_000));
  assert.equal(count(c, "repairs_started"), 2);
  // Both copied: their next unknown paths start no repair.
  route(a, 200, 1);
  route(b, 201, 1);
  m.clock.advance(1100);
  assert.equal(count(c, "repairs_started"), 2);
  for (const i of [0, 29, 30, 59, 100, 101, 102]) {
    assert.equal(nextTurn(c, i), nextTurn(i < 30 || i === 100 || i === 101 ? a : b, i));
  }
  m.stop();
});

Deno.test("tree sync: a repair without progress for 5 s is retried from its cursor with another peer", () => {
  const m = mesh(["a", "b", "c"], { pageBytes: 4096 });
  const [a, b, c] = ["a", "b", "c"].map(m.node);
  const picks = route(a, 0, 300);
  for (const n of [b]) {
    for (const e of [...a.policy.shared.exportTree("m", "string")]) {
      n.policy.shared.applyEntry("m", "string", e);
    }
  }
  m.link("a", "c");
  m.link("b", "c");
  // a's pages after the second never arrive.
  let pagesFromA = 0;
  m.setDrop((from, _to, type) => from === "a" && type === "tree_repair_page" && ++pagesFromA > 2);
  route(a, 1000, 1);
  m.clock.advance(1005);
  assert.equal(count(c, "repairs_started"), 1);
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_retried") === 1, 10_000));
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_finished") === 1, 10_000));
  assert.ok(count(b, "pages_sent") > 0, "the retry went to b");
  for (const i of [0, 150, 299]) assert.equal(nextTurn(c, i), picks.get(i));
  m.stop();
});

Deno.test("tree sync: a repair that never progresses fails after three retries; stale pages are dropped", () => {
  const m = mesh(["a", "c"]);
  const [a, c] = ["a", "c"].map(m.node);
  route(a, 0, 10);
  m.link("a", "c");
  const held: Uint8Array[] = [];
  m.setDrop((from, _to, type, payload) => {
    if (from !== "a" || type !== "tree_repair_page") return false;
    held.push(payload);
    return true;
  });
  route(a, 100, 1);
  m.clock.advance(1005);
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_failed") === 1, 60_000));
  assert.equal(count(c, "repairs_retried"), 3);
  assert.equal(c.sync.repairing, 0);
  // A page of a session that ended is stale.
  m.setDrop(() => false);
  c.sync.onEnvelope("a", "tree_repair_page", held[0]);
  c.sync.onEnvelope("a", "tree_repair_page", new Uint8Array([0xff]));
  assert.equal(count(c, "pages_stale"), 1);
  assert.equal(count(c, "malformed"), 1);
  m.stop();
});

Deno.test("tree sync: a stream that reopens makes the next unknown path repair again", () => {
  const m = mesh(["a", "b"]);
  const [a, b] = ["a", "b"].map(m.node);
  m.link("a", "b");
  route(a, 0, 5);
  m.clock.advanceUntil(() => count(b, "repairs_finished") === 1, 10_000);
  m.unlink("a", "b");
  const missed = route(a, 5, 40);
  m.clock.advance(1100);
  m.link("a", "b");
  route(a, 100, 1);
  assert.ok(m.clock.advanceUntil(() => count(b, "repairs_finished") === 2, 10_000));
  for (const [i, url] of missed) assert.equal(nextTurn(b, i), url);
  m.stop();
});

Deno.test("tree sync: PD legs share their trees by role; a role without cache_aware drops", () => {
  const m = mesh(["a", "b"], { role: "prefill" });
  const [a, b] = ["a", "b"].map(m.node);
  m.link("a", "b");
  const picks = route(a, 0, 5);
  m.clock.advance(1010);
  assert.equal(count(b, "deltas_received"), rungs(picks));
  for (const [i, url] of picks) assert.equal(nextTurn(b, i), url);
  // b routes the model without cache_aware: the deltas are dropped.
  const m2 = mesh(["x", "y"], { notCacheAware: "y" });
  m2.link("x", "y");
  const picks2 = route(m2.node("x"), 0, 3);
  m2.clock.advance(1010);
  assert.equal(count(m2.node("y"), "deltas_dropped"), rungs(picks2));
  assert.equal(count(m2.node("y"), "repairs_started"), 0);
  m.stop();
  m2.stop();
});

/** The pages `from` sends `to` while the fake time advances, decoded. */
function pagesSeen(m: ReturnType<typeof mesh>, from: string) {
  const pages: codec.RepairPage[] = [];
  m.setDrop((f, _t, type, payload) => {
    if (f === from && type === "tree_repair_page") {
      const p = codec.decodePage(payload);
      if (p.ok && p.value) pages.push(p.value);
    }
    return false;
  });
  return pages;
}

const request_ = (session: string, cursor: number) =>
  codec.encodeRequest({ session, role: "main", model: "m", kind: "string", cursor });

Deno.test("tree sync: a cursor skips exactly that many entries, however the work is sliced", () => {
  for (const sliceMs of [4, -1]) {
    const m = mesh(["a", "b"], { sliceMs, pageEntries: 64 });
    const [a] = ["a"].map(m.node);
    route(a, 0, 500);
    m.link("a", "b");
    const all = [...a.policy.shared.exportTree("m", "string")];
    const pages = pagesSeen(m, "a");
    a.sync.onEnvelope("b", "tree_repair_request", request_("s1", 300));
    m.clock.advance(2000);
    const got = pages.filter((p) => p.session === "s1").flatMap((p) => p.entries);
    assert.deepEqual(got, all.slice(300), `sliceMs ${sliceMs}`);
    const last = pages.filter((p) => p.session === "s1").at(-1)!;
    assert.equal(last.last, true);
    assert.equal(last.nextCursor, all.length);
    m.stop();
  }
});

Deno.test("tree sync: a newer request for the same tree cancels the earlier answer; pages wait for room", () => {
  const m = mesh(["a", "b"], { pageEntries: 16 });
  const [a] = ["a"].map(m.node);
  route(a, 0, 200);
  m.link("a", "b");
  const pages = pagesSeen(m, "a");
  m.setQueued(100); // the stream to b is backed up
  a.sync.onEnvelope("b", "tree_repair_request", request_("old", 0));
  m.clock.advance(1000);
  assert.equal(pages.length, 0, "no page while the stream is full");
  a.sync.onEnvelope("b", "tree_repair_request", request_("new", 0));
  m.setQueued(0);
  m.clock.advance(3000);
  // (b's own repair, asked when the stream opened, is answered too.)
  const ours = pages.filter((p) => p.session === "old" || p.session === "new");
  assert.deepEqual(new Set(ours.map((p) => p.session)), new Set(["new"]));
  assert.equal(ours.at(-1)!.last, true);
  m.stop();
});

Deno.test("tree sync: a path too long to send is skipped and counted", () => {
  const m = mesh(["a", "b"], { maxPathUnits: 200 });
  const [a, b] = ["a", "b"].map(m.node);
  const ws = WORKERS.slice(0, 2);
  a.policy.select(ws, request("x".repeat(500)));
  a.policy.select(ws, request("short prompt but above one block of sixty-four characters, really"));
  m.link("a", "b");
  m.clock.advanceUntil(() => count(b, "repairs_finished") === 1, 10_000);
  assert.equal(count(a, "entries_skipped"), 1);
  const paths = [...b.policy.shared.exportTree("m", "string")].filter((e) => "path" in e);
  assert.equal(paths.length, 1);
  m.stop();
});

// ---- Corrections (tree feedback) ----

const W1 = WORKERS[0];
const SYSTEM = "You are the assistant of tenant nine; answer briefly and politely. ".repeat(6);
const turn = (c: string) => SYSTEM + `${c}${c} question ${c}, `.repeat(12);

/** Sends `text` to w1 through `node`; returns the selection note. */
function send(node: Node, text: string): SelectionNote {
  const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
  node.policy.select([W1], request(text), note);
  return note;
}

/** `node` routes `text` to w1 and hears that w1 held only half the system prompt. */
function evicted(node: Node, text: string): void {
  const note = send(node, text);
  note.onReport!({ prompt: text.length / 4, cached: SYSTEM.length / 8 });
}

Deno.test("tree sync: a correction reaches the peers in its round, in order among the deltas; a peer relays the placements of its own paths", () => {
  const m = mesh(["a", "b", "c"]);
  const [a, b, c] = ["a", "b", "c"].map(m.node);
  m.link("a", "b");
  m.link("a", "c");
  m.link("b", "c");
  send(a, turn("x"));
  send(b, turn("y"));
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_finished") === 2, 10_000));
  send(b, turn("v")); // after a copied b's tree: a knows it as a placement only
  m.clock.advance(1000);
  for (const n of [a, b, c]) {
    for (const t of ["x", "y", "v"]) {
      assert.ok(believed(n.policy.shared, "m", turn(t), W1.url) > SYSTEM.length);
    }
  }
  evicted(a, turn("z"));
  send(a, turn("x")); // re-sent after the correction, in the same round: w1 holds x again
  m.clock.advance(1000);
  assert.equal(count(a, "corrections_sent"), 2);
  assert.equal(count(b, "corrections_received"), 1);
  assert.equal(count(b, "corrections_relayed"), 1, "b forgot v, whose path only b held");
  m.clock.advance(1000);
  assert.equal(count(c, "corrections_received"), 2, "a's and b's relay");
  for (const n of [a, b, c]) {
    for (const t of ["y", "v"]) {
      assert.ok(
        believed(n.policy.shared, "m", turn(t), W1.url) <= SYSTEM.length,
        `${n.name}: ${t}`,
      );
    }
    // The delta decided after the correction was applied after it.
    assert.ok(
      believed(n.policy.shared, "m", turn("x"), W1.url) > SYSTEM.length,
      `${n.name}: x again`,
    );
  }
  m.stop();
});

Deno.test("tree sync: a router that missed a correction applies it from a repair's first page; a repair from it brings nothing back", () => {
  const m = mesh(["a", "b", "c"]);
  const [a, b, c] = ["a", "b", "c"].map(m.node);
  m.link("a", "b");
  m.link("a", "c");
  m.link("b", "c");
  send(a, turn("x"));
  assert.ok(m.clock.advanceUntil(() => count(c, "repairs_finished") === 1, 10_000));
  m.unlink("a", "c");
  m.unlink("b", "c");
  m.clock.advance(1000);
  evicted(a, turn("z"));
  m.clock.advance(1000);
  assert.ok(believed(b.policy.shared, "m", turn("x"), W1.url) <= SYSTEM.length);
  assert.ok(believed(c.policy.shared, "m", turn("x"), W1.url) > SYSTEM.length, "c missed it");
  // The streams reopen: each side copies the other's trees, c's pages carrying the stale x.
  m.link("a", "c");
  m.link("b", "c");
  const stale = pagesSeen(m, "c");
  m.clock.advance(10_000);
  for (const n of [a, b, c]) assert.equal(n.sync.repairing, 0);
  assert.ok(count(a, "repairs_finished") >= 1 && count(b, "repairs_finished") >= 2);
  const paths = stale.flatMap((p) => p.entries).filter((e) => "path" in e && e.path === turn("x"));
  assert.ok(paths.length >= 1, "c's pages carried x");
  assert.ok(count(c, "corrections_received") >= 1);
  for (const n of [a, b, c]) {
    assert.ok(believed(n.policy.shared, "m", turn("x"), W1.url) <= SYSTEM.length, n.name);
  }
  m.stop();
});

/** A TreeSync of router "a" with one open peer, and the tree_deltas envelopes it sends. */
function lonePublisher() {
  const clock = new FakeClock();
  const replicas = new PolicyReplicas();
  const sync = new TreeSync({
    replicas,
    clock,
    log: silentLogger,
    random: seededRandom(1),
    name: "a",
  });
  const sent: Uint8Array[] = [];
  sync.attach({
    openPeers: () => ["b"],
    send(_peer, type, payload) {
      if (type === "tree_deltas") sent.push(payload);
      return true;
    },
  });
  sync.peerChanged("b", true);
  const delta = (hash: number, worker: string) =>
    replicas.deltaSink!("main", "m", "string", hash, worker);
  /** The deltas of the rounds sent so far, in order. */
  const deltas = () =>
    sent.flatMap((b) => {
      const d = codec.decodeDeltas(b);
      assert.ok(d.ok);
      return d.value.groups.flatMap((g) => g.deltas);
    });
  return { clock, replicas, sync, sent, delta, deltas };
}

Deno.test("tree sync: a round sends each (hash, worker) pair once, at its last decision", () => {
  const { clock, replicas, sync, sent, delta } = lonePublisher();
  delta(1, "u1");
  delta(2, "u1");
  delta(1, "u1"); // still hash 1's latest: once
  delta(1, "u2"); // another worker: its own
  delta(3, "u1");
  delta(3, "u2");
  delta(3, "u1"); // u1 again after u2: it moves behind u2, so the peer holds u1 as the most recent
  replicas.correctionSink!("main", "m", "string", {
    worker: "u1",
    branch: "abc",
    kept: 1,
    hashes: [1],
    ageMs: 0,
  });
  delta(1, "u1"); // after the correction that dropped it: again
  clock.advance(1000);
  assert.equal(sent.length, 1);
  const d = codec.decodeDeltas(sent[0]);
  assert.ok(d.ok);
  const g = d.value.groups.find((x) => x.deltas.length > 0)!;
  assert.deepEqual(g.deltas.map((x) => [x.hash, x.worker]), [
    [1, "u1"],
    [1, "u2"],
    [2, "u1"],
    [3, "u2"],
    [3, "u1"],
    [1, "u1"],
  ]);
  assert.deepEqual(g.corrections.map((c) => c.after), [5]);
  sync.stop();
});

Deno.test("tree sync: the peer's placements end as if every decision had been sent", () => {
  const { clock, sync, delta, deltas } = lonePublisher();
  const random = seededRandom(7);
  const every = new Placements();
  let decisions = 0;
  for (let round = 0; round < 5; round++) {
    // A hot prefix alternating between its holders, and more workers than a hash keeps.
    for (let i = 0; i < 300; i++, decisions++) {
      const hash = Math.floor(random() * 6);
      const worker = `u${Math.floor(random() * (hash === 0 ? 2 : 7))}`;
      every.add(hash, worker);
      delta(hash, worker);
    }
    clock.advance(1000);
  }
  const sent = deltas();
  const peer = new Placements();
  for (const x of sent) peer.add(x.hash, x.worker);
  const holders = (p: Placements) => new Map([...p.entries()].map((e) => [e.hash, e.tenants]));
  assert.deepEqual(holders(peer), holders(every));
  assert.ok(sent.length < decisions / 5, `${sent.length} deltas for ${decisions} decisions`);
  sync.stop();
});
