import assert from "node:assert/strict";
import { StickyMap, stickyMapKey } from "../../lib/policies/sticky_map.ts";
import { views } from "../../support/policies.ts";

const H = 3_600_000; // one hour in ms

Deno.test("sticky_map: peek is pinned, stale or vacant (test_peek_pin_states)", () => {
  const [w0, w1, w2] = views(3);
  const m = new StickyMap({ maxIdleSecs: 0 });
  assert.deepEqual(m.peek("k", [w0, w1], 0), { kind: "vacant" });
  m.push("k", w0.id, 0);
  assert.deepEqual(m.peek("k", [w0, w1], 0), { kind: "pinned", worker: w0 });
  assert.deepEqual(m.peek("k", [w1, w2], 0), { kind: "stale" });
  assert.deepEqual(m.peek("k", [], 0), { kind: "stale" });
});

Deno.test("sticky_map: the first pinned worker among the candidates wins, in pin order", () => {
  const [w0, w1, w2] = views(3);
  const m = new StickyMap({ maxIdleSecs: 0 });
  m.push("k", w1.id, 0);
  m.push("k", w0.id, 0);
  const table: [typeof w0[], string | null][] = [
    [[w0, w1, w2], "w1"], // candidate order does not matter, pin order does
    [[w2, w0], "w0"],
    [[w2], null],
  ];
  for (const [cands, want] of table) {
    const p = m.peek("k", cands, 0);
    assert.equal(p.kind === "pinned" ? p.worker.id : null, want, cands.map((c) => c.id).join());
  }
});

Deno.test("sticky_map: push appends and keeps the newest two (test_manual_routing_info_push_bounded)", () => {
  const m = new StickyMap({ maxIdleSecs: 0 });
  const table: [string, string[]][] = [
    ["a", ["a"]],
    ["b", ["a", "b"]],
    ["c", ["b", "c"]],
    ["c", ["b", "c"]], // no duplicates
    ["b", ["c", "b"]],
  ];
  for (const [id, want] of table) {
    m.push("k", id, 0);
    assert.deepEqual(m.pinsOf("k"), want, `after push ${id}`);
  }
});

Deno.test("sticky_map: pinFront promotes, dedups and bounds to two (test_pin_front_promotes_and_bounds_candidates)", () => {
  const m = new StickyMap({ maxIdleSecs: 0 });
  const table: [string, string[]][] = [
    ["a", ["a"]],
    ["b", ["b", "a"]],
    ["a", ["a", "b"]],
    ["c", ["c", "a"]],
    ["c", ["c", "a"]],
  ];
  for (const [id, want] of table) {
    m.pinFront("k", id, 0);
    assert.deepEqual(m.pinsOf("k"), want, `after pinFront ${id}`);
  }
  assert.equal(m.size, 1);
});

Deno.test("sticky_map: every use refreshes the last access (test_manual_last_access_updates)", () => {
  const [w0] = views(1);
  const m = new StickyMap({ maxIdleSecs: 10 });
  m.push("k", w0.id, 100);
  const table: [string, (t: number) => void][] = [
    ["peek hit", (t) => m.peek("k", [w0], t)],
    ["peek stale", (t) => m.peek("k", [], t)],
    ["touch", (t) => m.touch("k", t)],
    ["push", (t) => m.push("k", "x", t)],
    ["pinFront", (t) => m.pinFront("k", w0.id, t)],
  ];
  let t = 100;
  for (const [what, use] of table) {
    t += 5_000;
    use(t);
    assert.equal(m.lastAccessOf("k"), t, what);
  }
});

Deno.test("sticky_map: a key idle for max-idle is gone, a used one stays (test_manual_ttl_eviction_logic)", () => {
  const [w0] = views(1);
  const m = new StickyMap({ maxIdleSecs: 4 * 3600 });
  m.push("idle", w0.id, 0);
  m.push("busy", w0.id, 0);
  for (let t = H; t <= 5 * H; t += H) m.touch("busy", t);
  assert.equal(m.sweep(4 * H - 1), 0, "not yet idle for 4 h");
  assert.equal(m.sweep(4 * H), 1, "idle exactly 4 h");
  assert.equal(m.pinsOf("idle"), undefined);
  assert.deepEqual(m.pinsOf("busy"), [w0.id]);
  assert.equal(m.size, 1);
});

Deno.test("sticky_map: an expired key is vacant before any sweep", () => {
  const [w0] = views(1);
  const m = new StickyMap({ maxIdleSecs: 60 });
  m.push("k", w0.id, 0);
  assert.equal(m.peek("k", [w0], 59_999).kind, "pinned");
  assert.equal(m.peek("k", [w0], 59_999 + 60_000).kind, "vacant");
  // Re-pinned from scratch, not appended to the expired entry.
  m.push("k", "other", 200_000);
  assert.deepEqual(m.pinsOf("k"), ["other"]);
});

Deno.test("sticky_map: max-idle 0 never expires or sweeps", () => {
  const [w0] = views(1);
  const m = new StickyMap({ maxIdleSecs: 0, evictionIntervalSecs: 1 });
  m.push("k", w0.id, 0);
  assert.equal(m.sweep(1e12), 0);
  assert.equal(m.sweepIfDue(0) + m.sweepIfDue(1e12), 0);
  assert.equal(m.peek("k", [w0], 1e12).kind, "pinned");
});

Deno.test("sticky_map: sweepIfDue sweeps at most once per eviction interval (test_manual_with_disabled_eviction)", () => {
  const table = [
    {
      interval: 120,
      calls: [0, 60_000, 119_999, 120_000, 130_000, 240_000],
      sweeps: [120_000, 240_000],
    },
    { interval: 0, calls: [0, 120_000, 1e9], sweeps: [] },
  ];
  for (const { interval, calls, sweeps } of table) {
    const m = new StickyMap({ maxIdleSecs: 1, evictionIntervalSecs: interval });
    const swept: number[] = [];
    for (const t of calls) {
      m.push(`k${t}`, "w", t - 1_000); // one key that is exactly idle long enough at t
      if (m.sweepIfDue(t) > 0) swept.push(t);
    }
    assert.deepEqual(swept, sweeps, `interval ${interval}`);
  }
});

Deno.test("sticky_map: a sweep removes only idle keys, wherever they were used", () => {
  const m = new StickyMap({ maxIdleSecs: 10 });
  for (let i = 0; i < 100; i++) m.push(`k${i}`, "w", i * 100); // used at 0 .. 9.9 s
  for (let i = 0; i < 100; i += 10) m.touch(`k${i}`, 9_950); // every tenth used again
  // At 12 s the keys last used at or before 2 s are idle for 10 s: k0..k20 but k0, k10, k20.
  assert.equal(m.sweep(12_000), 21 - 3);
  for (let i = 0; i < 100; i++) {
    const kept = i % 10 === 0 || i > 20;
    assert.equal(m.pinsOf(`k${i}`) !== undefined, kept, `k${i}`);
  }
});

Deno.test("sticky_map: past maxEntries the least recently used key is dropped", () => {
  const m = new StickyMap({ maxIdleSecs: 0, maxEntries: 3 });
  m.push("a", "w", 1);
  m.push("b", "w", 2);
  m.push("c", "w", 3);
  m.touch("a", 4);
  m.push("d", "w", 5);
  assert.equal(m.size, 3);
  assert.equal(m.pinsOf("b"), undefined);
  assert.ok(m.pinsOf("a") && m.pinsOf("c") && m.pinsOf("d"));
});

Deno.test("sticky_map: forgetWorker unpins a worker everywhere, keys stay (stale)", () => {
  const [w0, w1] = views(2);
  const m = new StickyMap({ maxIdleSecs: 0 });
  m.push("a", w0.id, 0);
  m.push("b", w1.id, 0);
  m.push("b", w0.id, 0);
  m.forgetWorker(w0.id);
  assert.deepEqual(m.pinsOf("a"), []);
  assert.deepEqual(m.pinsOf("b"), [w1.id]);
  assert.equal(m.peek("a", [w0, w1], 0).kind, "stale");
  assert.equal(m.size, 2);
});

Deno.test("sticky_map: keys are scoped by model", () => {
  const table: [string | null, string, string | null, string, boolean][] = [
    ["a", "k", "b", "k", false],
    ["a", "k", "a", "k", true],
    [null, "k", "", "k", true], // no model is one scope
    ["a\0b", "k", "a", "b\0k", false], // body rids may hold any character
    ["ab", "k", "a", "bk", false],
    ["1:a", "b", "1", ":ab", false],
  ];
  for (const [m1, k1, m2, k2, same] of table) {
    assert.equal(stickyMapKey(m1, k1) === stickyMapKey(m2, k2), same, `${m1}/${k1} ${m2}/${k2}`);
  }
});
