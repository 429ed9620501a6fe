/**
 * The contract every policy must meet, run against each one `createPolicy` can build: it only
 * ever returns one of the candidates it was given, null when there are none, the same sequence
 * of picks for the same seed, and keeps working while workers come and go between calls.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import type { WorkerView } from "../../lib/core/types.ts";
import { POLICY_NAMES } from "../../lib/config/config.ts";
import { AVAILABLE_POLICIES, createPolicy } from "../../lib/policies/factory.ts";
import { deps, load, request, view, views } from "../../support/policies.ts";

/** Policies allowed to decline (return null) although candidates exist; none so far. */
const MAY_DECLINE: ReadonlySet<string> = new Set();

/** Requests with varied text, keys and tokens, so text- and key-aware policies branch. */
function requests(n: number) {
  const rnd = seededRandom(99);
  return Array.from(
    { length: n },
    (_, i) =>
      request(`prompt ${i % 7} ${"x".repeat(Math.floor(rnd() * 50))}`, {
        routingKey: i % 3 === 0 ? `key-${i % 5}` : null,
        tokens: i % 4 === 0 ? [i, i + 1, i + 2] : null,
        model: i % 2 ? "a" : "b",
      }),
  );
}

/** Candidates with different in-flight counts and loads, for load-aware policies. */
function busyViews(n: number): WorkerView[] {
  return Array.from({ length: n }, (_, i) =>
    view(`w${i}`, {
      inFlight: (i * 7) % 5,
      load: i % 2 ? load({ runningRequests: i, tokenUsage: i / (n + 1) }) : null,
    }));
}

Deno.test("policies: at least the basic policies are available", () => {
  for (const name of ["random", "round_robin", "passthrough"]) {
    assert.ok(AVAILABLE_POLICIES.includes(name as never), name);
  }
});

for (const name of AVAILABLE_POLICIES) {
  Deno.test(`${name}: is named by its id`, () => {
    assert.equal(createPolicy(name, deps()).name, name);
  });

  Deno.test(`${name}: null when there are no candidates`, () => {
    const p = createPolicy(name, deps());
    for (const r of requests(5)) assert.equal(p.select([], r), null);
    // Still null after having served a non-empty set.
    p.select(views(3), request());
    assert.equal(p.select([], request()), null);
  });

  Deno.test(`${name}: the only candidate is picked`, () => {
    const p = createPolicy(name, deps());
    const only = [view("solo")];
    for (const r of requests(20)) assert.equal(p.select(only, r), only[0]);
  });

  Deno.test(`${name}: never returns something that is not a candidate`, () => {
    const p = createPolicy(name, deps(3));
    for (const n of [1, 2, 3, 5, 8]) {
      const cands = busyViews(n);
      for (const r of requests(200)) {
        const pick = p.select(cands, r);
        if (pick === null && MAY_DECLINE.has(name)) continue;
        assert.ok(pick !== null, `${n} candidates: declined`);
        assert.ok(cands.includes(pick), `${n} candidates: returned ${pick?.id}`);
      }
    }
  });

  Deno.test(`${name}: the same seed gives the same sequence of picks`, () => {
    const run = (seed: number) => {
      const p = createPolicy(name, deps(seed));
      const cands = busyViews(6);
      return requests(300).map((r) => p.select(cands, r)?.id);
    };
    assert.deepEqual(run(17), run(17));
  });

  Deno.test(`${name}: survives workers coming and going between calls`, () => {
    const p = createPolicy(name, deps(5));
    const churn = seededRandom(11);
    const pool = views(12);
    let cands = pool.slice(0, 4);
    let picked = 0;
    for (const r of requests(1000)) {
      const roll = churn();
      if (roll < 0.15 && cands.length > 0) {
        const gone = cands[Math.floor(churn() * cands.length)];
        cands = cands.filter((c) => c !== gone);
        p.onWorkerRemoved?.(gone.id);
      } else if (roll < 0.3) {
        const missing = pool.filter((w) => !cands.includes(w));
        if (missing.length) cands = [...cands, missing[Math.floor(churn() * missing.length)]];
      }
      const pick = p.select(cands, r);
      if (cands.length === 0) {
        assert.equal(pick, null);
      } else {
        assert.ok(
          pick && cands.includes(pick),
          `returned ${pick?.id} from ${cands.map((c) => c.id)}`,
        );
        picked++;
      }
    }
    assert.ok(picked > 800, `only ${picked} picks`);
  });

  Deno.test(`${name}: does not modify the candidate list`, () => {
    const p = createPolicy(name, deps());
    const cands = Object.freeze(busyViews(4));
    const before = cands.map((c) => c.id);
    for (const r of requests(50)) p.select(cands, r);
    assert.deepEqual(cands.map((c) => c.id), before);
  });
}

Deno.test("createPolicy: every policy SMG knows is built, so no --policy value is refused", () => {
  assert.deepEqual(POLICY_NAMES.filter((n) => !AVAILABLE_POLICIES.includes(n)), []);
  assert.equal(AVAILABLE_POLICIES.length, 10);
});

Deno.test("createPolicy: every call builds a policy with fresh state", () => {
  const cands = views(3);
  for (const name of AVAILABLE_POLICIES) {
    const a = createPolicy(name, deps(1));
    const first = a.select(cands, request())?.id;
    a.select(cands, request());
    const b = createPolicy(name, deps(1));
    assert.equal(b.select(cands, request())?.id, first, name);
  }
});
