import assert from "node:assert/strict";
import type { PolicyName } from "../../lib/config/config.ts";
import type { WorkerView } from "../../lib/core/types.ts";
import { AVAILABLE_POLICIES, createPolicy } from "../../lib/policies/factory.ts";
import { RoundRobinPolicy } from "../../lib/policies/round_robin.ts";
import { STICKY_INFLIGHT_CAP, stickyAppliesTo, StickySessions } from "../../lib/policies/sticky.ts";
import { extractRouteRequest } from "../../lib/requests/route_request.ts";
import { view, views } from "../../support/policies.ts";
import { keyed, ScriptedPolicy, stickyDeps, tracked } from "../support/sticky.ts";

const override = (c: { routingKeyOverride: boolean }) => c.routingKeyOverride = true;

/** A chat request through the real extraction, with the override on. */
function chat(
  rid: string | null,
  headers: Record<string, string> = {},
  names = ["x-smg-routing-key"],
) {
  return extractRouteRequest(
    "chat",
    { model: "m", messages: [{ role: "user", content: "hi" }], ...(rid ? { rid } : {}) },
    new Headers(headers),
    { routingKeyHeaders: names, routingKeyOverride: true },
  );
}

Deno.test("sticky: wraps every policy but manual and consistent_hashing (override_eligibility_skips_key_native_policies)", () => {
  const table: [PolicyName, boolean][] = [
    ["cache_aware", true],
    ["prefix_hash", true],
    ["least_load", true],
    ["power_of_two", true],
    ["round_robin", true],
    ["random", true],
    ["passthrough", true],
    ["bucket", true],
    ["manual", false],
    ["consistent_hashing", false],
  ];
  for (const [name, wraps] of table) assert.equal(stickyAppliesTo(name), wraps, name);
  for (const name of AVAILABLE_POLICIES) {
    const on = createPolicy(name, stickyDeps(override));
    const off = createPolicy(name, stickyDeps());
    assert.equal(on instanceof StickySessions, stickyAppliesTo(name), `${name} with override`);
    assert.ok(!(off instanceof StickySessions), `${name} without override`);
    assert.equal(on.name, name, "keeps the inner name for metrics");
    assert.deepEqual(on.needs, off.needs, name);
  }
});

Deno.test("sticky: a keyed conversation stays, keyless requests rotate (override_routes_keyed_request_stickily, override_without_key_uses_configured_policy)", () => {
  const p = createPolicy("round_robin", stickyDeps(override));
  const cands = views(3);
  const keyedPicks = Array.from({ length: 9 }, () => p.select(cands, chat("conv_t1"))?.id);
  assert.equal(new Set(keyedPicks).size, 1);
  const plain = Array.from({ length: 6 }, () => p.select(cands, chat(null))?.id);
  assert.equal(new Set(plain).size, 3, `round_robin rotates: ${plain}`);
});

Deno.test("sticky: without the override a key changes nothing (override_disabled_ignores_key)", () => {
  const p = createPolicy("round_robin", stickyDeps());
  const cands = views(3);
  const picks = Array.from({ length: 6 }, () => p.select(cands, keyed("user-1"))?.id);
  assert.deepEqual(picks, ["w0", "w1", "w2", "w0", "w1", "w2"]);
});

Deno.test("sticky: turns and retries of one conversation share a pin, rid or header (header_turns_pin_the_same_sticky_entry)", () => {
  const d = stickyDeps(override);
  const p = new StickySessions(new RoundRobinPolicy(), d);
  const cands = views(5);
  const table: [string, ReturnType<typeof chat>][] = [
    ["rid turn 1", chat("conv7_t1")],
    ["rid turn 2", chat("conv7_t2")],
    ["rid retry", chat("conv7_t2_r1")],
    ["header turn 3", chat(null, { "x-smg-routing-key": "conv7_t3" })],
    ["header retry", chat(null, { "x-smg-routing-key": "conv7_t3_r2" })],
    ["bare", chat(null, { "x-smg-routing-key": "conv7" })],
  ];
  const home = p.select(cands, table[0][1]);
  for (const [what, r] of table) assert.equal(p.select(cands, r), home, what);
  assert.equal(p.size, 1);
});

Deno.test("sticky: the rid key wins over the header, the header is the fallback (rid_key_wins_over_header_and_header_is_fallback)", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [w0, w1] = views(2);
  inner.choose = () => w0;
  p.select([w0, w1], chat("conv-a_t1")); // pins conv-a on w0
  inner.choose = () => w1;
  p.select([w0, w1], chat(null, { "x-smg-routing-key": "user-b" })); // pins user-b on w1
  const table: [string, ReturnType<typeof chat>, WorkerView, "rid" | "header"][] = [
    ["rid and header", chat("conv-a_t2", { "x-smg-routing-key": "user-b" }), w0, "rid"],
    ["header only", chat(null, { "x-smg-routing-key": "user-b" }), w1, "header"],
    [
      "alternate header",
      chat(null, { "x-alt": "user-b" }, ["x-smg-routing-key", "x-alt"]),
      w1,
      "header",
    ],
  ];
  for (const [what, r, want, source] of table) {
    assert.equal(p.select([w0, w1], r), want, what);
    assert.equal(d.rec.sources.at(-1), source, what);
  }
});

Deno.test("sticky: delegate asks the inner policy once, then pins (delegate_assignment_routes_via_underlying_policy_then_pins)", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const cands = views(3);
  assert.equal(p.select(cands, keyed("k"))?.id, "w2"); // the inner pick (its last candidate)
  inner.choose = (c) => c[0];
  for (let i = 0; i < 5; i++) assert.equal(p.select(cands, keyed("k"))?.id, "w2");
  assert.equal(inner.calls.length, 1, "inner asked once");
  // One decision per keyed request (sticky_selection_emits_decision_line_per_request).
  assert.deepEqual(d.rec.decisions, ["sticky:vacant", ...Array(5).fill("sticky:occupied_hit")]);
  assert.deepEqual(d.rec.entries, Array(6).fill(1));
});

Deno.test("sticky: an unavailable pin respills through the stale path (overloaded_sticky_pin_respills_through_the_stale_path)", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [w0, w1, w2] = views(3);
  inner.choose = () => w0;
  p.select([w0, w1, w2], keyed("k"));
  inner.choose = (c) => c.at(-1)!;
  assert.equal(p.select([w1, w2], keyed("k")), w2);
  assert.equal(d.rec.decisions.at(-1), "sticky:occupied_miss");
  // Delegate mode makes the new pick the primary: w0's return does not move the key back.
  assert.equal(p.select([w0, w1, w2], keyed("k")), w2);
  assert.equal(d.rec.decisions.at(-1), "sticky:occupied_hit");
});

Deno.test("sticky: no candidates is null and no_healthy_workers (all_overloaded_leaves_sticky_selection_empty)", () => {
  const d = stickyDeps(override);
  const p = new StickySessions(new ScriptedPolicy(), d);
  assert.equal(p.select([], keyed("k")), null);
  assert.deepEqual(d.rec.decisions, ["sticky:no_healthy_workers"]);
});

Deno.test("sticky: the per-key in-flight cap respills the third request (two_inflight_same_key_respill_the_third)", () => {
  assert.equal(STICKY_INFLIGHT_CAP, 2);
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [a, b] = [tracked("a"), tracked("b")];
  const cands = [a.view, b.view];
  // Three concurrent requests of one key: two fit on the pin, the third respills to b.
  const picks: string[] = [];
  for (let i = 0; i < 3; i++) {
    inner.choose = (c) => c[i === 0 ? 0 : 1];
    const w = p.select(cands, keyed("k"))!;
    (w === a.view ? a : b).hold("k");
    picks.push(w.id);
  }
  assert.deepEqual(picks, ["a", "a", "b"]);
  assert.deepEqual(d.rec.decisions, ["sticky:vacant", "sticky:occupied_hit", "sticky:cap_respill"]);
  // The pin followed the strictly better pick (cap_respill_reassigns_and_pin_follows_strict_improvement).
  a.release("k");
  a.release("k");
  assert.equal(p.select(cands, keyed("k")), b.view);
  assert.equal(d.rec.decisions.at(-1), "sticky:occupied_hit");
});

Deno.test("sticky: cap respill keeps the pin when no pick is under the cap (cap_respill_keeps_pin_when_no_strictly_better_pick)", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [a, b] = [tracked("a"), tracked("b")];
  inner.choose = (c) => c[0];
  p.select([a.view, b.view], keyed("k"));
  for (const w of [a, b]) for (let i = 0; i < STICKY_INFLIGHT_CAP; i++) w.hold("k");
  inner.choose = (c) => c[1];
  assert.equal(p.select([a.view, b.view], keyed("k")), b.view, "the pick is served");
  assert.equal(d.rec.decisions.at(-1), "sticky:cap_respill");
  for (let i = 0; i < STICKY_INFLIGHT_CAP; i++) a.release("k");
  assert.equal(p.select([a.view, b.view], keyed("k")), a.view, "pin did not move");
});

Deno.test("sticky: other traffic on the pinned worker never respills (busy_worker_does_not_respill_idle_key)", () => {
  const d = stickyDeps(override);
  const p = new StickySessions(new ScriptedPolicy(), d);
  const [a, b] = [tracked("a"), tracked("b")];
  p.select([a.view, b.view], keyed("k")); // pinned on b (the scripted inner's last)
  b.busy(500);
  b.hold("other-key");
  b.hold("other-key");
  b.hold("k");
  assert.equal(p.select([a.view, b.view], keyed("k")), b.view);
  assert.equal(d.rec.decisions.at(-1), "sticky:occupied_hit");
});

Deno.test("sticky: with one worker the cap toggles cap_respill and occupied_hit (cap_lifts_when_key_inflight_drains)", () => {
  const d = stickyDeps(override);
  const p = new StickySessions(new ScriptedPolicy(), d);
  const w = tracked("only");
  const table: [number, string][] = [
    [0, "vacant"],
    [1, "occupied_hit"],
    [2, "cap_respill"],
    [3, "cap_respill"],
    [1, "occupied_hit"],
    [2, "cap_respill"],
    [0, "occupied_hit"],
  ];
  let held = 0;
  for (const [inFlight, branch] of table) {
    while (held < inFlight) w.hold("k"), held++;
    while (held > inFlight) w.release("k"), held--;
    assert.equal(p.select([w.view], keyed("k")), w.view);
    assert.equal(d.rec.decisions.at(-1), `sticky:${branch}`, `${inFlight} in flight`);
  }
});

Deno.test("sticky: non-delegate modes place and respill by the assignment mode (cap_respill_under_legacy_assignment)", () => {
  const d = stickyDeps((c) => {
    override(c);
    c.manual.assignmentMode = "min_load";
  });
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [a, b, c] = [tracked("a"), tracked("b"), tracked("c")];
  const cands = [a.view, b.view, c.view];
  b.busy(3);
  c.busy(3);
  assert.equal(p.select(cands, keyed("k")), a.view, "least loaded");
  a.hold("k");
  a.hold("k"); // a now has 2 in flight of k: at the cap, and 2 < 3 so still least loaded
  assert.equal(p.select(cands, keyed("k")), a.view, "respill picks a again: pin kept");
  a.busy(10);
  assert.equal(p.select(cands, keyed("k"))?.id !== "a", true, "respill leaves a");
  assert.equal(inner.calls.length, 0, "the inner policy is never asked");
  const moved = d.rec.decisions.filter((x) => x === "sticky:cap_respill").length;
  assert.equal(moved, 2);
  a.release("k");
  a.release("k");
  const home = p.select(cands, keyed("k"));
  assert.notEqual(home, a.view, "the pin moved with the respill");
});

Deno.test("sticky: a respill the inner policy declines stays on the pin", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const w = tracked("w");
  inner.choose = (c) => c[0];
  p.select([w.view, view("x")], keyed("k"));
  w.hold("k");
  w.hold("k");
  inner.choose = () => null;
  assert.equal(p.select([w.view, view("x")], keyed("k")), w.view);
  assert.equal(d.rec.decisions.at(-1), "sticky:cap_respill");
});

Deno.test("sticky: keys are scoped by model", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const a = views(2, "a");
  const b = views(2, "b");
  const pa = p.select(a, keyed("user", { model: "ma" }));
  const pb = p.select(b, keyed("user", { model: "mb" }));
  for (let i = 0; i < 4; i++) {
    assert.equal(p.select(a, keyed("user", { model: "ma" })), pa);
    assert.equal(p.select(b, keyed("user", { model: "mb" })), pb);
  }
  assert.equal(d.rec.decisions.filter((x) => x !== "sticky:occupied_hit").length, 2);
});

Deno.test("sticky: idle keys expire after max-idle and are swept lazily", () => {
  const d = stickyDeps((c) => {
    override(c);
    c.manual.maxIdleSecs = 300;
    c.evictionIntervalSecs = 60;
  });
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const cands = views(3);
  for (let i = 0; i < 5; i++) p.select(cands, keyed(`k${i}`));
  assert.equal(p.size, 5);
  d.advance(299_000);
  inner.choose = (c) => c[0];
  assert.equal(p.select(cands, keyed("k0"))?.id, "w2", "still pinned at 299 s");
  d.advance(250_000);
  assert.equal(p.select(cands, keyed("k1"))?.id, "w0", "k1 idle 549 s: placed afresh");
  assert.equal(d.rec.decisions.at(-1), "sticky:vacant");
  assert.equal(p.size, 2, "k2..k4 swept, k1 re-pinned, k0 kept");
  assert.equal(p.sweep(d.now() + 300_000), 2);
});

Deno.test("sticky: a removed worker is forwarded to the inner policy and unpinned", () => {
  const d = stickyDeps(override);
  const inner = new ScriptedPolicy();
  const p = new StickySessions(inner, d);
  const [w0, w1] = views(2);
  inner.choose = () => w0;
  p.select([w0, w1], keyed("k"));
  p.onWorkerRemoved(w0.id);
  assert.deepEqual(inner.removed, [w0.id]);
  inner.choose = () => w1;
  assert.equal(p.select([w0, w1], keyed("k")), w1);
  assert.equal(d.rec.decisions.at(-1), "sticky:occupied_miss");
});
