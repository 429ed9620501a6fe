import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { LwwStore, type Op } from "../../../lib/mesh/store/lww_store.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined) =>
  b === undefined ? undefined : new TextDecoder().decode(b);

Deno.test("store: local writes tick the clock; a peer's op moves it past the peer's", () => {
  const a = new LwwStore("a");
  const op1 = a.write("w", "k", bytes("1"), 0) as Op;
  const op2 = a.write("w", "k", bytes("2"), 0) as Op;
  assert.equal(op1.clock, 1);
  assert.equal(op2.clock, 2);
  const b = new LwwStore("b");
  assert.equal(b.apply(op2, 0), "applied");
  assert.equal(b.clock, 2);
  const op3 = b.write("w", "k", bytes("3"), 0) as Op;
  assert.equal(op3.clock, 3, "a write after seeing another's is newer than it");
});

Deno.test("store: last writer wins by clock, then replica id, whatever the arrival order", () => {
  const ops: Op[] = [
    { ns: "w", key: "k", value: bytes("x"), clock: 5, replica: "a" },
    { ns: "w", key: "k", value: bytes("y"), clock: 5, replica: "b" },
    { ns: "w", key: "k", value: bytes("z"), clock: 4, replica: "c" },
  ];
  for (const order of [[0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]]) {
    const s = new LwwStore("r");
    for (const i of order) s.apply(ops[i], 0);
    assert.equal(text(s.get("w", "k")), "y", `order ${order}`);
  }
});

Deno.test("store: a tombstone blocks a delayed older write, even for a key never seen alive", () => {
  const s = new LwwStore("r");
  assert.equal(s.apply({ ns: "w", key: "k", value: null, clock: 7, replica: "a" }, 0), "applied");
  assert.equal(
    s.apply({ ns: "w", key: "k", value: bytes("old"), clock: 6, replica: "b" }, 0),
    "stale",
  );
  assert.equal(s.get("w", "k"), undefined);
  assert.equal(
    s.apply({ ns: "w", key: "k", value: bytes("new"), clock: 8, replica: "b" }, 0),
    "applied",
  );
  assert.equal(text(s.get("w", "k")), "new", "a newer write does come back");
  // Removing what is not there is no op.
  assert.equal(s.write("w", "nothing", null, 0), "stale");
});

Deno.test("store: duplicate delivery changes nothing and notifies nobody", () => {
  const s = new LwwStore("r");
  const seen: string[] = [];
  s.onChange((e, origin) => seen.push(`${e.key}:${origin}`));
  const op: Op = { ns: "w", key: "k", value: bytes("v"), clock: 3, replica: "a" };
  s.apply(op, 0);
  s.apply(op, 0);
  s.apply({ ...op }, 0);
  assert.deepEqual(seen, ["k:remote"]);
});

Deno.test("store: changesSince lists each key's latest change once, in change order", () => {
  const s = new LwwStore("r");
  s.write("w", "a", bytes("1"), 0);
  const mark = s.seq;
  s.write("w", "b", bytes("1"), 0);
  s.write("w", "a", bytes("2"), 0);
  s.write("p", "c", bytes("1"), 0);
  assert.deepEqual([...s.changesSince(mark)].map((e) => `${e.ns}/${e.key}`), ["w/b", "w/a", "p/c"]);
  assert.deepEqual([...s.changesSince(s.seq)], []);
  // Thousands of rewrites of one key keep the log short.
  for (let i = 0; i < 5000; i++) s.write("w", "hot", bytes(String(i)), 0);
  assert.equal([...s.changesSince(0)].length, 4);
});

Deno.test("store: tombstones are collected only after the grace and when every peer has them", () => {
  const s = new LwwStore("r");
  s.write("w", "k", bytes("v"), 0);
  s.write("w", "k", null, 1000);
  assert.deepEqual(s.counts().get("w"), { live: 0, tombstones: 1 });
  assert.equal(s.collect(1500, 1000, () => true), 0, "too young");
  assert.equal(s.collect(5000, 1000, () => false), 0, "a peer may lack it");
  assert.equal(s.collect(5000, 1000, () => true), 1);
  assert.equal(s.entry("w", "k"), undefined);
  assert.deepEqual(s.counts().get("w"), { live: 0, tombstones: 0 });
});

Deno.test("store: after a collection, late copies are refused, then everything below the horizon", () => {
  const s = new LwwStore("r");
  const live = { ns: "w", key: "k", value: bytes("v"), clock: 1, replica: "p" };
  s.apply(live, 0);
  s.apply({ ...live, value: null, clock: 2 }, 0);
  assert.equal(s.collect(5000, 1000, () => true), 1);
  assert.equal(s.apply(live, 5000), "collected", "the removed value, late");
  assert.equal(s.horizon("w"), 0, "remembered by version for one more grace");
  assert.equal(s.apply({ ...live, key: "other", clock: 2 }, 5000), "applied", "no horizon yet");
  s.collect(6500, 1000, () => true);
  assert.equal(s.horizon("w"), 2);
  assert.equal(
    s.apply({ ...live, key: "third", clock: 2 }, 6500),
    "below_horizon",
  );
  assert.equal(s.apply({ ...live, key: "third", clock: 3 }, 6500), "applied");
  assert.equal(s.apply({ ...live, clock: 3 }, 6500), "applied", "a newer write of k is news");
  assert.equal(s.apply({ ...live, ns: "x", key: "fresh" }, 6500), "applied", "per namespace");
});

Deno.test("store: a tombstone a peer collected is dropped and remembered; observe moves the clock", () => {
  const s = new LwwStore("r");
  s.apply({ ns: "w", key: "k", value: null, clock: 5, replica: "p" }, 0);
  assert.equal(s.dropCollected("w", "k", { clock: 4, replica: "p" }, 0, 1000), false, "newer here");
  assert.equal(s.dropCollected("w", "k", { clock: 5, replica: "p" }, 0, 1000), true);
  assert.deepEqual(s.counts().get("w"), { live: 0, tombstones: 0 });
  assert.equal(
    s.apply({ ns: "w", key: "k", value: null, clock: 5, replica: "p" }, 10),
    "collected",
  );
  s.observe(40);
  assert.equal(s.clock, 40);
  s.observe(2 ** 40); // far ahead: refused, as a peer's op would be
  assert.equal(s.clock, 40);
});

Deno.test("store: forget drops exactly that live version, without a tombstone, and tells listeners", () => {
  const s = new LwwStore("r");
  const heard: [string, boolean][] = [];
  s.onChange((e) => heard.push([e.key, e.value === null]));
  const op = { ns: "w", key: "k", value: bytes("v"), clock: 4, replica: "p" };
  s.apply(op, 0);
  assert.equal(s.forget("w", "k", { clock: 3, replica: "p" }), false, "another version");
  assert.equal(s.forget("w", "k", op), true);
  assert.equal(s.entry("w", "k"), undefined);
  assert.deepEqual(s.counts().get("w"), { live: 0, tombstones: 0 });
  assert.deepEqual(heard, [["k", false], ["k", true]]);
});

Deno.test("store: oversized values and keys past the limit are refused", () => {
  const s = new LwwStore("r", { maxValueBytes: 4, maxKeys: 2 });
  assert.equal(s.write("w", "a", bytes("12345"), 0), "too_large");
  assert.equal(
    s.apply({ ns: "w", key: "a", value: bytes("12345"), clock: 1, replica: "x" }, 0),
    "too_large",
  );
  s.write("w", "a", bytes("1"), 0);
  s.write("w", "b", bytes("1"), 0);
  assert.equal(s.write("w", "c", bytes("1"), 0), "too_many_keys");
  assert.notEqual(s.write("w", "a", bytes("2"), 0), "too_many_keys", "existing keys still update");
  assert.notEqual(s.write("other", "c", bytes("1"), 0), "too_many_keys", "per namespace");
});

Deno.test("store: three replicas converge under random concurrent writes and reordered delivery", () => {
  const random = seededRandom(5);
  const names = ["a", "b", "c"];
  const stores = names.map((n) => new LwwStore(n));
  const inbox: Op[][] = names.map(() => []);
  for (let i = 0; i < 2000; i++) {
    const w = Math.floor(random() * 3);
    const key = `k${Math.floor(random() * 20)}`;
    const op = stores[w].write("w", key, random() < 0.3 ? null : bytes(String(i)), i);
    if (typeof op === "string") continue;
    for (let j = 0; j < 3; j++) if (j !== w) inbox[j].push(op);
    // Deliver a random part of each inbox, in random order, sometimes twice.
    for (let j = 0; j < 3; j++) {
      while (inbox[j].length > 0 && random() < 0.5) {
        const k = Math.floor(random() * inbox[j].length);
        const m = inbox[j][k];
        if (random() < 0.9) inbox[j].splice(k, 1);
        stores[j].apply(m, i);
      }
    }
  }
  for (let j = 0; j < 3; j++) for (const m of inbox[j]) stores[j].apply(m, 9999);
  const view = (s: LwwStore) =>
    [...s.all()].map((e) => `${e.key}=${e.value ? text(e.value) : "-"}@${e.clock}${e.replica}`)
      .sort();
  assert.deepEqual(view(stores[1]), view(stores[0]));
  assert.deepEqual(view(stores[2]), view(stores[0]));
});

Deno.test("store: a peer's clock far ahead, keys too long and unknown namespaces are refused", () => {
  const s = new LwwStore("r", { namespaces: new Set(["w"]), maxKeyLength: 8 });
  const op = (o: Partial<Op>): Op => ({
    ns: "w",
    key: "k",
    value: bytes("v"),
    clock: 1,
    replica: "a",
    ...o,
  });
  assert.equal(s.apply(op({ clock: 2 ** 53 - 1 }), 0), "bad_clock");
  assert.equal(s.apply(op({ clock: 2 ** 33 }), 0), "bad_clock", "more than 2^32 ahead of ours");
  assert.equal(s.clock, 0, "a refused clock does not move ours");
  assert.equal(s.apply(op({ key: "much-too-long" }), 0), "too_large");
  assert.equal(s.apply(op({ ns: "other" }), 0), "unknown_namespace");
  assert.equal(s.apply(op({}), 0), "applied");
});
