import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import type { WorkerView } from "../../lib/core/types.ts";
import { createPolicy } from "../../lib/policies/factory.ts";
import { ManualPolicy } from "../../lib/policies/manual.ts";
import { extractRouteRequest } from "../../lib/requests/route_request.ts";
import { tally, view, views } from "../../support/policies.ts";
import { keyed, stickyDeps, tracked } from "../support/sticky.ts";

const ids = (ws: readonly (WorkerView | null)[]) => ws.map((w) => w?.id ?? null);

Deno.test("manual: first request is vacant, then occupied_hit on the same worker (test_manual_consistent_routing)", () => {
  const d = stickyDeps();
  const p = new ManualPolicy(d);
  const cands = views(3);
  const picks = Array.from({ length: 6 }, () => p.select(cands, keyed("user-1")));
  assert.equal(new Set(ids(picks)).size, 1);
  assert.deepEqual(d.rec.decisions, [
    "manual:vacant",
    ...Array(5).fill("manual:occupied_hit"),
  ]);
  assert.deepEqual(d.rec.entries, Array(6).fill(1));
});

Deno.test("manual: many keys spread over the workers (test_manual_different_routing_ids)", () => {
  const p = new ManualPolicy(stickyDeps());
  const cands = views(4);
  const t = tally(Array.from({ length: 400 }, (_, i) => p.select(cands, keyed(`k${i}`))));
  assert.equal(t.size, 4);
  for (const [id, n] of t) assert.ok(n > 60 && n < 140, `${id}: ${n} of 400`);
  assert.equal(p.size, 400);
});

Deno.test("manual: keyless requests are placed but not pinned (test_manual_fallback_random)", () => {
  const d = stickyDeps();
  const p = new ManualPolicy(d);
  const cands = views(2);
  const t = tally(Array.from({ length: 100 }, () => p.select(cands, keyed(null))));
  assert.equal(t.size, 2, "both workers used");
  assert.equal(p.size, 0);
  assert.deepEqual(new Set(d.rec.decisions), new Set(["manual:no_routing_id"]));
});

Deno.test("manual: no candidates is null and no_healthy_workers (test_manual_no_healthy_workers)", () => {
  const d = stickyDeps();
  const p = new ManualPolicy(d);
  assert.equal(p.select([], keyed("k")), null);
  assert.equal(p.select([], keyed(null)), null);
  assert.deepEqual(d.rec.decisions, ["manual:no_healthy_workers", "manual:no_healthy_workers"]);
});

Deno.test("manual: only candidates are chosen, then sticky (test_manual_with_unhealthy_workers)", () => {
  const p = new ManualPolicy(stickyDeps());
  const [w0, w1, w2] = views(3);
  for (let i = 0; i < 20; i++) {
    const first = p.select([w1], keyed(`k${i}`));
    assert.equal(first, w1);
    // w0 and w2 recover: the key stays where it was pinned.
    assert.equal(p.select([w0, w1, w2], keyed(`k${i}`)), w1);
  }
});

Deno.test("manual: failover, recovery and forgetting after two failovers", () => {
  // One key through a sequence of candidate sets: expected pick (null = any new one) and branch.
  const [w0, w1, w2, w3] = views(4);
  const d = stickyDeps((c) => c.manual.assignmentMode = "min_load");
  const p = new ManualPolicy(d);
  const steps: [WorkerView[], string, string][] = [
    [[w0], "w0", "vacant"],
    [[w0, w1, w2], "w0", "occupied_hit"],
    // w0 down: a second worker is appended (test_manual_remaps_when_worker_becomes_unhealthy).
    [[w1], "w1", "occupied_miss"],
    [[w1, w2], "w1", "occupied_hit"],
    // w0 back: it is the primary again (test_manual_worker_recovery).
    [[w0, w1, w2], "w0", "occupied_hit"],
    // Both down: w2 appended, w0 dropped (test_manual_max_candidate_workers_eviction).
    [[w2, w3], "w2", "occupied_miss"],
    [[w0, w1, w2, w3], "w1", "occupied_hit"],
    [[w0, w2, w3], "w2", "occupied_hit"],
  ];
  for (const [i, [cands, want, branch]] of steps.entries()) {
    // min_load with ties broken at random: make the wanted new worker the least loaded.
    const loaded = cands.map((c) => c.id === want ? c : view(c.id, { inFlight: 5 }));
    const pick = p.select(loaded, keyed("conv"));
    assert.equal(pick?.id, want, `step ${i}`);
    assert.equal(d.rec.decisions.at(-1), `manual:${branch}`, `step ${i}`);
  }
});

Deno.test("manual: one worker takes everything (test_manual_single_worker)", () => {
  const p = new ManualPolicy(stickyDeps());
  const only = [view("only")];
  for (const k of ["a", "b", null, "a"]) assert.equal(p.select(only, keyed(k)), only[0]);
});

Deno.test("manual: defaults are random placement, 4 h idle, 120 s sweeps (test_manual_config_default)", () => {
  const c = defaultConfig();
  assert.deepEqual(c.manual, { assignmentMode: null, maxIdleSecs: 14400 });
  assert.equal(c.evictionIntervalSecs, 120);
  // null means random for manual: load is not considered (test_random_mode_does_not_consider_load).
  const p = new ManualPolicy(stickyDeps());
  const cands = [view("idle"), view("busy", { inFlight: 1000, activeKeys: 500 })];
  const t = tally(Array.from({ length: 200 }, (_, i) => p.select(cands, keyed(`k${i}`))));
  assert.ok((t.get("busy") ?? 0) > 60, `busy got ${t.get("busy")} of 200`);
});

Deno.test("manual: assignment modes place new keys by their measure", () => {
  const table: { mode: "min_load" | "min_group" | "delegate"; want: string }[] = [
    // test_min_load_select_prefers_worker_with_fewer_requests
    { mode: "min_load", want: "few_requests" },
    // test_delegate_mode_standalone_assigns_min_load
    { mode: "delegate", want: "few_requests" },
    // test_min_group_select_prefers_worker_with_fewer_routing_keys
    { mode: "min_group", want: "few_keys" },
  ];
  const cands = [
    view("few_requests", { inFlight: 1, activeKeys: 9 }),
    view("few_keys", { inFlight: 9, activeKeys: 1 }),
    view("neither", { inFlight: 9, activeKeys: 9 }),
  ];
  for (const { mode, want } of table) {
    const p = new ManualPolicy(stickyDeps((c) => c.manual.assignmentMode = mode));
    for (let i = 0; i < 20; i++) assert.equal(p.select(cands, keyed(`k${i}`))?.id, want, mode);
    assert.equal(p.select(cands, keyed(null))?.id, want, `${mode} keyless`);
  }
});

Deno.test("manual: min_group spreads keys evenly and keeps them (test_min_group_select_distributes_evenly)", () => {
  const p = new ManualPolicy(stickyDeps((c) => c.manual.assignmentMode = "min_group"));
  const ws = [tracked("a"), tracked("b"), tracked("c")];
  const cands = ws.map((w) => w.view);
  const first = new Map<string, string>();
  for (let i = 0; i < 9; i++) {
    const key = `key-${i}`;
    const pick = p.select(cands, keyed(key))!;
    ws.find((w) => w.view === pick)!.hold(key); // the request stays in flight
    first.set(key, pick.id);
  }
  assert.deepEqual(cands.map((c) => c.activeKeys), [3, 3, 3]);
  // test_min_group_sticky_after_assignment: later turns stay put although loads changed.
  ws[0].busy(50);
  for (const [key, id] of first) assert.equal(p.select(cands, keyed(key))?.id, id, key);
});

Deno.test("manual: the body rid key beats the header under --routing-key-override", () => {
  const p = new ManualPolicy(stickyDeps());
  const cands = views(8);
  const req = (rid: string | null, header: string | null) =>
    extractRouteRequest(
      "chat",
      { model: "m", messages: [{ role: "user", content: "hi" }], ...(rid ? { rid } : {}) },
      new Headers(header ? { "x-smg-routing-key": header } : {}),
      { routingKeyHeaders: ["x-smg-routing-key"], routingKeyOverride: true },
    );
  const home = p.select(cands, req("conv7_t1", null));
  for (let i = 0; i < 10; i++) {
    assert.equal(p.select(cands, req(`conv7_t${i}`, `other-${i}`)), home, `turn ${i}`);
    assert.equal(p.select(cands, req(`conv7_t${i}_r1`, null)), home, `retry of turn ${i}`);
  }
  // A header alone pins on its lineage too (conv8_t1 and conv8_t2 are one conversation).
  const h = p.select(cands, req(null, "conv8_t1"));
  for (let i = 2; i < 10; i++) assert.equal(p.select(cands, req(null, `conv8_t${i}`)), h);
});

Deno.test("manual: the same key under two models pins separately and does not bounce", () => {
  const d = stickyDeps((c) => c.manual.assignmentMode = "min_load");
  const p = new ManualPolicy(d);
  const a = [view("a0"), view("a1")];
  const b = [view("b0"), view("b1")];
  const pa = p.select(a, keyed("user", { model: "ma" }));
  const pb = p.select(b, keyed("user", { model: "mb" }));
  for (let i = 0; i < 5; i++) {
    assert.equal(p.select(a, keyed("user", { model: "ma" })), pa);
    assert.equal(p.select(b, keyed("user", { model: "mb" })), pb);
  }
  assert.equal(p.size, 2);
  assert.deepEqual(d.rec.decisions.filter((x) => x !== "manual:occupied_hit"), [
    "manual:vacant",
    "manual:vacant",
  ]);
});

Deno.test("manual: idle keys are swept lazily once per eviction interval, used keys stay", () => {
  const d = stickyDeps((c) => {
    c.manual.maxIdleSecs = 600;
    c.evictionIntervalSecs = 60;
  });
  const p = new ManualPolicy(d);
  const cands = views(2);
  for (let i = 0; i < 10; i++) p.select(cands, keyed(`k${i}`));
  const kept = p.select(cands, keyed("k0"));
  for (let minute = 1; minute <= 11; minute++) {
    d.advance(60_000);
    assert.equal(p.select(cands, keyed("k0")), kept, `minute ${minute}`);
  }
  // At 11 minutes k1..k9 were idle for 600 s or more: swept by the select at minute 10 or 11.
  assert.equal(p.size, 1);
  assert.ok(d.rec.entries.includes(1));
  assert.ok(d.lines.some((l) => /idle routing keys evicted/.test(l) && /"evicted":9/.test(l)));
  // A direct sweep far in the future drops the rest.
  assert.equal(p.sweep(d.now() + 600_000), 1);
  assert.equal(p.size, 0);
});

Deno.test("manual: a removed worker is dropped from the pins", () => {
  const d = stickyDeps((c) => c.manual.assignmentMode = "min_load");
  const p = new ManualPolicy(d);
  const w0 = view("w0", { inFlight: 5 });
  const w1 = view("w1");
  assert.equal(p.select([w0], keyed("k")), w0);
  assert.equal(p.select([w0, w1], keyed("k")), w0, "pinned while known");
  p.onWorkerRemoved(w0.id);
  // Had the pin survived, a worker re-registered under that id would keep the key.
  assert.equal(p.select([w0, w1], keyed("k")), w1);
  assert.equal(d.rec.decisions.at(-1), "manual:occupied_miss");
});

Deno.test("manual: built by the factory, never wrapped by sticky sessions", () => {
  for (const override of [false, true]) {
    const d = stickyDeps((c) => c.routingKeyOverride = override);
    const p = createPolicy("manual", d);
    assert.ok(p instanceof ManualPolicy, `override ${override}`);
    p.select(views(2), keyed("k", { ridKey: "k" }));
    assert.deepEqual(d.rec.sources, [], "manual reports no sticky key source");
  }
});
