/**
 * Cluster-wide tenant limits over the replicated store of an in-memory three-router mesh under
 * fake time: a tenant offered three times its limit, evenly over the routers, is admitted about
 * its limit in cluster mode and about three times it per router; a burst from idle is published
 * as it goes (about one bucket admitted), one quicker than a hop takes at most the routers' full
 * buckets and is repaid before more is admitted; shards are SMG's
 * 16-byte (epoch, count) counters, summed at the newest epoch; a router restarted under its old
 * name counts on from its earlier shard.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import { Charge, scopeId, TenantLimiter } from "../../../lib/limits/limiter.ts";
import { PolicySet } from "../../../lib/limits/policy.ts";
import {
  aggregate,
  decodeShard,
  EAGER_SHARE,
  encodeShard,
  RATE_LIMIT_NS,
  RateLimitSync,
} from "../../../lib/mesh/adapters/rate_limit_sync.ts";
import { LwwStore } from "../../../lib/mesh/store/lww_store.ts";
import { StoreSync } from "../../../lib/mesh/store/store_sync.ts";
import { Metrics } from "../../../lib/metrics/metrics.ts";
import { Cluster } from "../../../support/mesh_cluster.ts";

/** 120 requests a minute: 2 a second, a bucket of 120. Tokens never bind. */
const POLICY = new PolicySet({
  defaultPolicy: {
    tenantKey: null,
    limits: { tokensPerMinute: 10_000_000, requestsPerMinute: 120 },
    modelRules: [],
  },
  tenants: [],
});
const TENANT = "auth:team-red";

interface Router {
  limiter: TenantLimiter;
  store: LwwStore;
  sync: RateLimitSync | null;
}

async function mesh(n: number, cluster: boolean) {
  const c = new Cluster();
  const names = await c.grow(n);
  const routers: Router[] = [];
  const stops: (() => void)[] = [];
  for (const [i, name] of names.entries()) {
    const node = c.nodes.get(name)!.node;
    const limiter = new TenantLimiter(POLICY, c.clock, new Metrics());
    const store = new LwwStore(`${name}#1`, { namespaces: new Set([RATE_LIMIT_NS]) });
    const storeSync = new StoreSync({
      store,
      clock: c.clock,
      log: silentLogger,
      random: seededRandom(i),
    });
    node.streams.onPeer((p, open) => storeSync.peerChanged(p, open));
    node.streams.onEnvelope((p, t, b) => storeSync.onEnvelope(p, t, b));
    storeSync.attach(node.streams);
    const sync = cluster
      ? new RateLimitSync({
        limiter,
        store,
        router: name,
        clock: c.clock,
        wall: () => c.clock.now(),
        syncMs: 100,
        log: silentLogger,
      })
      : null;
    sync?.start();
    stops.push(() => (storeSync.stop(), sync?.stop()));
    routers.push({ limiter, store, sync });
  }
  assert.notEqual(c.waitFor(() => c.converged(), 30_000), null);
  c.clock.advance(3000); // streams open
  const stop = async () => {
    for (const s of stops) s();
    await c.stop();
  };
  return { c, names, routers, stop };
}

/** One request at router `r`: admitted (and settled) or not. */
function offer(r: Router): boolean {
  const got = r.limiter.reserve(TENANT, null, 10);
  if (!(got instanceof Charge)) return false;
  got.final(10, 0);
  return true;
}

/**
 * Offers `rps` requests a second for `secs`, round-robin over the routers; returns how many
 * were admitted in each second.
 */
function drive(c: Cluster, routers: Router[], rps: number, secs: number): number[] {
  const perSecond: number[] = [];
  let k = 0;
  for (let s = 0; s < secs; s++) {
    let admitted = 0;
    for (let i = 0; i < rps; i++) {
      c.clock.advance(1000 / rps);
      if (offer(routers[k++ % routers.length])) admitted++;
    }
    perSecond.push(admitted);
  }
  return perSecond;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

Deno.test("cluster limits: three routers admit about the limit together; per router about 3x", async () => {
  for (const cluster of [true, false]) {
    const { c, routers, stop } = await mesh(3, cluster);
    // 6 requests a second offered (3x the 2/s limit): the first minute spends the full buckets.
    const admitted = drive(c, routers, 6, 180);
    const steady = sum(admitted.slice(60)) / (120 * 2);
    if (cluster) {
      assert.ok(Math.abs(steady - 1) <= 0.1, `cluster mode admitted ${steady.toFixed(3)}x`);
      assert.ok(sum(admitted.slice(0, 60)) <= 120 + 120 + 10, `first minute ${admitted}`);
    } else {
      assert.ok(Math.abs(steady - 3) <= 0.3, `per-router mode admitted ${steady.toFixed(3)}x`);
    }
    await stop();
  }
});

Deno.test("cluster limits: a burst from idle is published as it goes, not at the interval", async () => {
  const { c, routers, stop } = await mesh(3, true);
  // 300 requests within 30 ms, spread over the routers: quicker than the interval (100 ms),
  // which alone would let each router spend its full bucket.
  let burst = 0;
  for (let i = 0; i < 300; i++) {
    if (i % 10 === 0) c.clock.advance(1);
    if (offer(routers[i % 3])) burst++;
  }
  // Each router publishes once it took 1/64 of the bucket (2 requests), so the others hear of
  // it a hop later: about one bucket in all.
  assert.equal(Math.ceil(120 * EAGER_SHARE), 2);
  const bound = 120 + 3 * 2 + 3;
  assert.ok(burst >= 120 && burst <= bound, `a burst of ${burst}, over ${bound}`);
  await stop();
});

Deno.test("cluster limits: a burst quicker than a hop takes at most every bucket, then is repaid", async () => {
  const { c, routers, stop } = await mesh(3, true);
  // 300 requests in one instant: no share can spread before they are decided.
  let burst = 0;
  for (let i = 0; i < 300; i++) if (offer(routers[i % 3])) burst++;
  assert.equal(burst, 300, "three full buckets hold the burst");
  c.clock.advance(1000);
  // Every router has heard of all of it: the debt over one bucket is repaid at 2/s before
  // anything more is admitted.
  for (const r of routers) {
    const left = r.limiter.available(scopeId(TENANT, null))!.requests;
    assert.ok(Math.abs(left - (120 - burst + 2)) <= 2, `left ${left}`);
  }
  const repaySecs = Math.floor((burst - 120) / 2);
  const after = drive(c, routers, 6, repaySecs + 60);
  assert.ok(sum(after.slice(0, repaySecs - 2)) === 0, "nothing until the debt is repaid");
  // Over the whole stretch the cluster took one bucket plus the rate, give or take a share.
  const total = burst + sum(after);
  const expected = 120 + 2 * (repaySecs + 61);
  assert.ok(Math.abs(total - expected) <= 0.05 * expected, `${total} vs ${expected}`);
  await stop();
});

Deno.test("cluster limits: shards are SMG's 16-byte counters, summed at the newest epoch", async () => {
  const { c, routers, stop } = await mesh(3, true);
  for (let i = 0; i < 9; i++) offer(routers[i % 3]);
  c.clock.advance(1000);
  const counter = `r.${scopeId(TENANT, null)}`;
  for (const r of routers) assert.equal(aggregate(r.store, counter), 9);
  const value = routers[0].store.get(RATE_LIMIT_NS, `${counter}:r0`)!;
  assert.equal(value.length, 16);
  assert.deepEqual(decodeShard(value), { epoch: 0, count: 3 });
  assert.deepEqual(decodeShard(encodeShard({ epoch: 2 ** 40, count: 7 })), {
    epoch: 2 ** 40,
    count: 7,
  });
  assert.equal(decodeShard(new Uint8Array(15)), null);
  // A new epoch (minute) starts counting again; the aggregate forgets the older epoch.
  c.clock.advance(60_000);
  offer(routers[1]);
  c.clock.advance(1000);
  assert.equal(aggregate(routers[2].store, counter), 1);
  await stop();
});
