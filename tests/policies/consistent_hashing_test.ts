import assert from "node:assert/strict";
import type { RouteRequest, WorkerView } from "../../lib/core/types.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import { ConsistentHashingPolicy, sessionKey } from "../../lib/policies/consistent_hashing.ts";
import { routingKeyFrom } from "../../lib/requests/route_request.ts";
import { deps, request, tally, view, views } from "../../support/policies.ts";

/** A policy whose decisions are recorded in `branches`. */
function policy(seed = 1) {
  const d = deps(seed);
  const branches: string[] = [];
  d.observer = {
    decision: (p, b) => {
      assert.equal(p, "consistent_hashing");
      branches.push(b);
    },
    stickyEntries: () => {},
    keySource: () => {},
  };
  return { p: new ConsistentHashingPolicy(d), branches };
}

const keyed = (routingKey: string | null, over: Partial<RouteRequest> = {}) =>
  request("text", { routingKey, ...over });
const withHeaders = (h: Record<string, string>, over: Partial<RouteRequest> = {}) =>
  request("text", { headers: new Headers(h), ...over });

function assertUnavailable(fn: () => unknown, value: string) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof GatewayError, String(e));
    assert.equal(e.status, 503);
    assert.equal(e.code, "target_worker_unavailable");
    assert.equal(e.retryAfter, 1);
    assert.equal(e.message, `X-SMG-Target-Worker '${value}' is not an available worker`);
    return true;
  });
}

Deno.test("consistent_hashing: name, needs, and null without candidates", () => {
  const { p, branches } = policy();
  assert.equal(p.name, "consistent_hashing");
  assert.deepEqual(p.needs, { requestText: false, backendLoads: false });
  assert.equal(p.select([], keyed("k")), null);
  assert.equal(p.select([], withHeaders({ "x-smg-target-worker": "0" })), null);
  assert.deepEqual(branches, ["no_healthy_workers", "no_healthy_workers"]);
});

Deno.test("consistent_hashing: the same key always reaches the same worker", () => {
  const { p, branches } = policy();
  const cands = views(5);
  for (let k = 0; k < 50; k++) {
    const first = p.select(cands, keyed(`user-${k}`));
    for (let i = 0; i < 5; i++) assert.equal(p.select(cands, keyed(`user-${k}`)), first);
    // Candidate order does not matter, only membership.
    assert.equal(p.select(cands.toReversed(), keyed(`user-${k}`)), first);
  }
  assert.ok(branches.every((b) => b === "routing_key_hit"));
});

Deno.test("consistent_hashing: different keys spread over the workers", () => {
  const { p } = policy();
  const cands = views(4);
  const t = tally(Array.from({ length: 2000 }, (_, i) => p.select(cands, keyed(`k${i}`))));
  assert.equal(t.size, 4);
  for (const [id, c] of t) assert.ok(c > 350 && c < 650, `${id}: ${c}`);
});

Deno.test("consistent_hashing: key sources in priority order", () => {
  const cands = views(8);
  const auth = { authorization: "Bearer a" };
  const xff = { "x-forwarded-for": "10.0.0.1" };
  const cookie = { cookie: "s=1" };
  const table: { name: string; req: RouteRequest; key: string | null; branch: string }[] = [
    {
      name: "rid beats header",
      req: keyed("hdr", { ridKey: "conv" }),
      key: "conv",
      branch: "rid_hit",
    },
    {
      name: "header beats implicit",
      req: keyed("hdr", { headers: new Headers(auth) }),
      key: "hdr",
      branch: "routing_key_hit",
    },
    {
      name: "authorization first",
      req: withHeaders({ ...cookie, ...xff, ...auth }),
      key: "Bearer a",
      branch: "routing_key_hit",
    },
    {
      name: "then x-forwarded-for",
      req: withHeaders({ ...cookie, ...xff }),
      key: "10.0.0.1",
      branch: "routing_key_hit",
    },
    { name: "then cookie", req: withHeaders(cookie), key: "s=1", branch: "routing_key_hit" },
    // Departure from SMG, which tries only the first present of Authorization / X-Forwarded-For /
    // Cookie and goes random on an empty one: an empty first header falls through to the next.
    {
      name: "empty authorization falls through",
      req: withHeaders({ authorization: "", ...xff }),
      key: "10.0.0.1",
      branch: "routing_key_hit",
    },
    {
      name: "non-ASCII cookie is no key",
      req: withHeaders({ cookie: "é" }),
      key: null,
      branch: "",
    },
    { name: "nothing", req: request("text"), key: null, branch: "" },
  ];
  for (const { name, req, key, branch } of table) {
    assert.deepEqual(sessionKey(req), [key, branch], name);
    if (key === null) continue;
    const a = policy();
    const b = policy(99);
    // The pick is exactly the pick for the winning key alone, whatever the seed.
    assert.equal(a.p.select(cands, req), b.p.select(cands, keyed(key)), name);
    assert.deepEqual(a.branches, [branch], name);
  }
});

Deno.test("consistent_hashing: a 129-byte routing key is no key (random), 128 bytes is", () => {
  const names = ["x-smg-routing-key"];
  assert.equal(routingKeyFrom(new Headers({ "x-smg-routing-key": "k".repeat(129) }), names), null);
  assert.equal(routingKeyFrom(new Headers({ "x-smg-routing-key": "" }), names), null);
  assert.equal(
    routingKeyFrom(new Headers({ "x-smg-routing-key": "k".repeat(128) }), names)?.length,
    128,
  );
  const { p, branches } = policy();
  const picks = Array.from({ length: 400 }, () => p.select(views(4), keyed(null)));
  assert.equal(tally(picks).size, 4);
  assert.ok(branches.every((b) => b === "random_fallback"));
});

Deno.test("consistent_hashing: no key → uniform random, reproducible under a seed", () => {
  const run = (seed: number) => {
    const { p } = policy(seed);
    return Array.from({ length: 4000 }, () => p.select(views(4), request("x")));
  };
  const t = tally(run(3));
  for (const [id, c] of t) assert.ok(c > 850 && c < 1150, `${id}: ${c}`);
  assert.deepEqual(run(3).map((w) => w?.id), run(3).map((w) => w?.id));
});

Deno.test("consistent_hashing: X-SMG-Target-Worker by index, URL or id", () => {
  const cands = views(3, "t");
  const table: [string, string][] = [
    ["1", "t1"],
    ["0", "t0"],
    ["http://t2:8000", "t2"],
    ["http://t2:8000/", "t2"],
    ["t0", "t0"],
  ];
  for (const [value, id] of table) {
    const { p, branches } = policy();
    // The target wins over rid, routing key and implicit keys.
    const req = withHeaders({ "x-smg-target-worker": value, authorization: "a" }, {
      routingKey: "k",
      ridKey: "r",
    });
    assert.equal(p.select(cands, req)?.id, id, value);
    assert.deepEqual(branches, ["target_worker_hit"]);
  }
});

Deno.test("consistent_hashing: unknown or unavailable target → 503, never rerouted", () => {
  const cands = views(3, "t");
  // t1 exists in the registry but is not eligible now (unhealthy, open breaker or overloaded).
  const eligible = [cands[0], cands[2]];
  for (const value of ["3", "99", "http://t1:8000", "t1", "nope", "-1", "1.5"]) {
    const { p, branches } = policy();
    const pool = value === "3" || value === "99" ? cands : eligible;
    assertUnavailable(() => p.select(pool, withHeaders({ "x-smg-target-worker": value })), value);
    assert.deepEqual(branches, ["target_worker_miss"]);
  }
  // The index counts positions in the eligible list, so index 1 is t2 while t1 is down.
  assert.equal(
    policy().p.select(eligible, withHeaders({ "x-smg-target-worker": "1" }))?.id,
    "t2",
  );
  // An empty header is absent, not a miss.
  assert.ok(policy().p.select(cands, withHeaders({ "x-smg-target-worker": "" })));
  const long = "x".repeat(300);
  assertUnavailable(
    () => policy().p.select(cands, withHeaders({ "x-smg-target-worker": long })),
    `${"x".repeat(256)}…`,
  );
});

Deno.test("consistent_hashing: an ineligible worker is skipped by every path", () => {
  const all = views(4, "v");
  const eligible = all.filter((w) => w.id !== "v2");
  const { p } = policy();
  for (let i = 0; i < 500; i++) {
    assert.notEqual(p.select(eligible, keyed(`k${i}`))?.id, "v2");
    assert.notEqual(p.select(eligible, request("x"))?.id, "v2");
  }
  assert.throws(() => p.select(eligible, withHeaders({ "x-smg-target-worker": "v2" })));
});

Deno.test("consistent_hashing: failover moves only the down worker's keys, recovery brings them back", () => {
  const { p } = policy();
  const cands = views(5, "f");
  const owners = (c: readonly WorkerView[]) =>
    Array.from({ length: 2000 }, (_, i) => p.select(c, keyed(`s${i}`))?.id);
  const healthy = owners(cands);
  const degraded = owners(cands.filter((c) => c.id !== "f3"));
  let moved = 0;
  for (let i = 0; i < healthy.length; i++) {
    if (healthy[i] === "f3") {
      moved++;
      assert.notEqual(degraded[i], "f3");
    } else assert.equal(degraded[i], healthy[i]);
  }
  assert.ok(moved > 250, `f3 owned ${moved} keys`);
  assert.deepEqual(owners(cands), healthy);
});

Deno.test("consistent_hashing: adding a worker moves ~1/(n+1) of keys, far fewer than random", () => {
  const KEYS = 10_000;
  for (const n of [8, 12, 16]) {
    const { p } = policy();
    const pool = views(n + 1, `g${n}-`);
    const before = Array.from(
      { length: KEYS },
      (_, i) => p.select(pool.slice(0, n), keyed(`${i}`)),
    );
    const after = Array.from({ length: KEYS }, (_, i) => p.select(pool, keyed(`${i}`)));
    const moved = before.filter((w, i) => w !== after[i]).length;
    const ratio = moved / KEYS * (n + 1);
    assert.ok(Math.abs(ratio - 1) <= 0.3, `n=${n}: moved ${moved}`);
    // Removing it again (registry removal) restores the original placement.
    p.onWorkerRemoved(pool[n].id);
    const back = Array.from({ length: KEYS }, (_, i) => p.select(pool.slice(0, n), keyed(`${i}`)));
    assert.deepEqual(back, before);
  }
});

Deno.test("consistent_hashing: a worker removed and re-registered under a new id keeps its keys", () => {
  const { p } = policy();
  const cands = views(4, "re");
  const before = Array.from({ length: 500 }, (_, i) => p.select(cands, keyed(`${i}`))?.url);
  p.onWorkerRemoved("re1");
  const again = [...cands.slice(0, 1), view("re1-new", { url: cands[1].url }), ...cands.slice(2)];
  const after = Array.from({ length: 500 }, (_, i) => p.select(again, keyed(`${i}`))?.url);
  assert.deepEqual(after, before);
});
