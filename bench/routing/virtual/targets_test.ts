/**
 * `bench:virtual`'s targets: entries become the gateway settings the gateway itself would parse
 * from the same flags.
 */

import assert from "node:assert/strict";
import { workerUrls } from "./run.ts";
import { parseTarget, targetConfig } from "./targets.ts";
import { SMG_SCORING } from "../targets.ts";

const URLS = workerUrls(2);

Deno.test("virtual targets: ref:affinity is consistent_hashing on the conversation key", () => {
  assert.deepEqual(parseTarget("ref:affinity"), {
    name: "ref:affinity",
    policy: "consistent_hashing",
    flags: [],
    affinity: true,
    routers: 1,
    mesh: false,
  });
  assert.throws(() => parseTarget("ref:oracle"), /ref:affinity only/);
});

Deno.test("virtual targets: #N is N routers behind a round-robin front, #N-mesh on a mesh", () => {
  const t = parseTarget("cache_aware:--cache-aware-work-weight 0.2#3-mesh");
  assert.deepEqual([t.name, t.policy, t.flags, t.routers, t.mesh], [
    "cache_aware:--cache-aware-work-weight 0.2#3-mesh",
    "cache_aware",
    ["--cache-aware-work-weight", "0.2"],
    3,
    true,
  ]);
  assert.deepEqual([parseTarget("round_robin#5").routers, parseTarget("round_robin#5").mesh], [
    5,
    false,
  ]);
  assert.throws(() => parseTarget("cache_aware#0"), /N ≥ 1/);
});

Deno.test("virtual targets: policies, bench:routing's variants and gateway flags", () => {
  assert.equal(targetConfig(parseTarget("round_robin"), URLS, 3).policy, "round_robin");
  assert.equal(targetConfig(parseTarget("smg:round_robin"), URLS, 3).randomSeed, 3);
  const variant = parseTarget("smg:cache_aware/smg");
  assert.deepEqual(variant.flags, SMG_SCORING.cache_aware);
  assert.equal(targetConfig(variant, URLS, 0).cacheAware.scoring, "smg");
  const own = targetConfig(
    parseTarget("cache_aware:--cache-aware-scoring=smg --load-monitor-interval 5"),
    URLS,
    0,
  );
  assert.equal(own.cacheAware.scoring, "smg");
  assert.equal(own.loadMonitor.intervalSecs, 5);
  assert.deepEqual(own.workerUrls, URLS);
  assert.throws(() => parseTarget("cache_awhere"), /no policy 'cache_awhere'/);
  assert.throws(() => parseTarget("cache_aware/nope"), /no variant 'nope'/);
  assert.throws(() => targetConfig(parseTarget("cache_aware:--no-such-flag"), URLS, 0));
});
