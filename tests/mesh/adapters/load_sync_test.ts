/**
 * Load sync between routers on fake time: a router's own load on a worker reaches its peers
 * within one interval and is summed there as the worker's peer load; unchanged load is not sent
 * again, except to a peer whose stream just opened; a closed stream's load is dropped; a
 * malformed report is refused and changes nothing; reports round-trip through the codec.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import {
  decodeLoads,
  encodeLoads,
  type LoadCounter,
  type LoadedWorker,
  LoadSync,
} from "../../../lib/mesh/adapters/load_sync.ts";
import type { StreamPort } from "../../../lib/mesh/streams.ts";

const URLS = ["http://w1:8000", "http://w2:8000"];

function worker(url: string) {
  return {
    url,
    ownInFlight: 0,
    ownPrefillTokens: 0,
    work: 0,
    ownRecentWork(_now: number) {
      return this.work;
    },
    peerInFlight: 0,
    peerPrefillTokens: 0,
    peerRecentWork: 0,
    peerRecentWorkAt: 0,
  } satisfies LoadedWorker & { work: number };
}

/** Routers named `names`, each with its own records of the same workers, none linked yet. */
function routers(names: string[], intervalMs = 50) {
  const clock = new FakeClock();
  const links = new Set<string>();
  const nodes = new Map<
    string,
    {
      sync: LoadSync;
      workers: ReturnType<typeof worker>[];
      counts: Map<LoadCounter, number>;
    }
  >();
  for (const name of names) {
    const workers = URLS.map(worker);
    const counts = new Map<LoadCounter, number>();
    const sync = new LoadSync({
      workers: () => workers,
      clock,
      intervalMs,
      log: silentLogger,
      count: (what, n) => counts.set(what, (counts.get(what) ?? 0) + n),
    });
    nodes.set(name, { sync, workers, counts });
  }
  for (const name of names) {
    const port: StreamPort = {
      openPeers: () => names.filter((p) => p !== name && links.has([name, p].sort().join())),
      send: (peer, type, payload) => {
        nodes.get(peer)!.sync.onEnvelope(name, type, payload);
        return true;
      },
    };
    nodes.get(name)!.sync.attach(port);
  }
  const node = (n: string) => nodes.get(n)!;
  return {
    clock,
    node,
    link(a: string, b: string) {
      links.add([a, b].sort().join());
      node(a).sync.peerChanged(b, true);
      node(b).sync.peerChanged(a, true);
    },
    unlink(a: string, b: string) {
      links.delete([a, b].sort().join());
      node(a).sync.peerChanged(b, false);
      node(b).sync.peerChanged(a, false);
    },
    stop: () => names.forEach((n) => node(n).sync.stop()),
  };
}

const peer = (w: LoadedWorker) => [w.peerInFlight, w.peerPrefillTokens];

Deno.test("load sync: a router's load reaches its peers within an interval, summed over them", () => {
  const m = routers(["a", "b", "c"]);
  m.link("a", "b");
  m.link("a", "c");
  m.link("b", "c");
  const [a, b, c] = ["a", "b", "c"].map(m.node);
  a.workers[0].ownInFlight = 3;
  a.workers[0].ownPrefillTokens = 1200;
  b.workers[0].ownInFlight = 1;
  b.workers[1].ownPrefillTokens = 500;
  m.clock.advance(49);
  assert.deepEqual(peer(c.workers[0]), [0, 0], "not before the interval");
  m.clock.advance(1);
  assert.deepEqual(peer(c.workers[0]), [4, 1200]);
  assert.deepEqual(peer(c.workers[1]), [0, 500]);
  assert.deepEqual(peer(a.workers[0]), [1, 0], "a hears b's, not its own");
  assert.deepEqual(peer(b.workers[0]), [3, 1200]);
  // The load drains: peers hear it at the next interval.
  a.workers[0].ownInFlight = 0;
  a.workers[0].ownPrefillTokens = 0;
  m.clock.advance(50);
  assert.deepEqual(peer(c.workers[0]), [1, 0]);
  m.stop();
  assert.deepEqual(peer(c.workers[0]), [0, 0], "stopped: the peers' load is forgotten");
});

Deno.test("load sync: recent work is told with the load and decays at the receiver", () => {
  const m = routers(["a", "b"]);
  m.link("a", "b");
  const [a, b] = ["a", "b"].map(m.node);
  a.workers[0].ownInFlight = 1;
  a.workers[0].work = 30_000;
  m.clock.advance(50);
  assert.equal(b.workers[0].peerRecentWork, 30_000);
  assert.equal(b.workers[0].peerRecentWorkAt, 50);
  // Decay alone changes nothing worth sending; the receiver decays what it holds itself.
  a.workers[0].work = 20_000;
  m.clock.advance(500);
  assert.equal(a.counts.get("sent"), 1);
  // A change of load sends the current figure.
  a.workers[0].ownInFlight = 2;
  m.clock.advance(50);
  assert.equal(b.workers[0].peerRecentWork, 20_000);
  m.stop();
});

Deno.test("load sync: unchanged load is not sent again, but a peer that connects hears it", () => {
  const m = routers(["a", "b", "c"]);
  m.link("a", "b");
  const [a, , c] = ["a", "b", "c"].map(m.node);
  a.workers[1].ownInFlight = 2;
  m.clock.advance(50);
  const sent = a.counts.get("sent");
  assert.equal(sent, 1);
  m.clock.advance(500);
  assert.equal(a.counts.get("sent"), sent, "nothing changed: nothing sent");
  m.link("a", "c");
  m.clock.advance(50);
  assert.equal(a.counts.get("sent"), 2, "only to the new peer");
  assert.deepEqual(peer(c.workers[1]), [2, 0]);
  assert.ok(a.counts.get("bytes_sent")! < 64, `${a.counts.get("bytes_sent")} bytes`);
  m.stop();
});

Deno.test("load sync: a closed stream's load is dropped; a malformed report changes nothing", () => {
  const m = routers(["a", "b"]);
  m.link("a", "b");
  const [a, b] = ["a", "b"].map(m.node);
  a.workers[0].ownInFlight = 5;
  m.clock.advance(50);
  assert.deepEqual(peer(b.workers[0]), [5, 0]);
  m.unlink("a", "b");
  assert.deepEqual(peer(b.workers[0]), [0, 0]);
  b.sync.onEnvelope("a", "worker_loads", new Uint8Array([0x0a, 0x05, 0x61]));
  assert.equal(b.counts.get("refused"), 1);
  assert.deepEqual(peer(b.workers[0]), [0, 0]);
  // Other envelope types are not load sync's.
  b.sync.onEnvelope("a", "tree_deltas", new Uint8Array([1, 2, 3]));
  assert.equal(b.counts.get("refused"), 1);
  m.stop();
});

Deno.test("load sync: reports round-trip; lists of different lengths are refused", () => {
  const loads = new Map([
    ["http://w1:8000", { inFlight: 7, prefillTokens: 123_456, recentWork: 5_000_000 }],
    ["http://w2:8000", { inFlight: 0, prefillTokens: 9, recentWork: 0 }],
  ]);
  const d = decodeLoads(encodeLoads(loads));
  assert.ok(d.ok);
  assert.deepEqual(d.value, loads);
  const empty = decodeLoads(encodeLoads(new Map()));
  assert.ok(empty.ok && empty.value.size === 0);
  // workers = ["x"], in_flight = [] (field 1, a one-byte string).
  const bad = decodeLoads(new Uint8Array([0x0a, 0x01, 0x78]));
  assert.ok(!bad.ok && /differ in length/.test(bad.detail), JSON.stringify(bad));
});
