/**
 * Characters per token over the replicated store: a router's own estimate is published (again
 * only when it moved), a peer routes with it until it has answers of its own, several peers'
 * figures are weighed by their samples, and malformed values are ignored.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import {
  decodeRatio,
  encodeRatio,
  RATIO_NS,
  RatioSync,
} from "../../../lib/mesh/adapters/ratio_sync.ts";
import { LwwStore, type Op } from "../../../lib/mesh/store/lww_store.ts";
import { TextRatios } from "../../../lib/workers/text_ratios.ts";
import { workerSetup } from "../../support/workers.ts";

function router(name: string, clock: FakeClock) {
  const store = new LwwStore(`${name}#1`, { namespaces: new Set([RATIO_NS]) });
  const ratios = new TextRatios();
  const ops: Op[] = [];
  const write = store.write.bind(store);
  store.write = (ns, key, value, now) => {
    const r = write(ns, key, value, now);
    if (typeof r !== "string") ops.push(r);
    return r;
  };
  const sync = new RatioSync({
    ratios,
    store,
    router: name,
    clock,
    intervalMs: 10_000,
    log: silentLogger,
  });
  return { store, ratios, sync, ops };
}

Deno.test("ratio sync: a router's estimate reaches a peer, which routes with it until it has its own", () => {
  const clock = new FakeClock(0);
  const a = router("a", clock);
  const b = router("b", clock);
  const { manager } = workerSetup(clock);
  const w = manager.add({ url: "http://w", models: ["m"] });
  for (let i = 0; i < 8; i++) a.ratios.observe("m", w, 8000, 1000);
  a.sync.flush();
  assert.equal(a.ops.length, 1);
  for (const op of a.ops) b.store.apply(op, clock.now());
  assert.equal(b.ratios.forModel("m"), 8);
  assert.equal(b.ratios.models()[0].source, "peers");
  // Unchanged: not written again.
  a.sync.flush();
  assert.equal(a.ops.length, 1);
  // A third router with more samples at 2 a token: the peers' figure is their weighted mean.
  const c = router("c", clock);
  for (let i = 0; i < 24; i++) c.ratios.observe("m", w, 2000, 1000);
  c.sync.flush();
  for (const op of c.ops) b.store.apply(op, clock.now());
  assert.equal(b.ratios.forModel("m"), (8 * 8 + 2 * 24) / 32);
  // b's own answers win once it has enough.
  for (let i = 0; i < 4; i++) b.ratios.observe("m", w, 4000, 1000);
  assert.equal(b.ratios.forModel("m"), 4);
});

Deno.test("ratio sync: 12 bytes, malformed values and the router's own key ignored", () => {
  assert.deepEqual(decodeRatio(encodeRatio({ charsPerToken: 3.25, samples: 17 })), {
    charsPerToken: 3.25,
    samples: 17,
  });
  assert.equal(decodeRatio(new Uint8Array(5)), null);
  assert.equal(decodeRatio(encodeRatio({ charsPerToken: -1, samples: 1 })), null);
  const clock = new FakeClock(0);
  const b = router("b", clock);
  const other = new LwwStore("x#1", { namespaces: new Set([RATIO_NS]) });
  const bad = other.write(RATIO_NS, "m:x", new Uint8Array([1, 2, 3]), 0) as Op;
  const own = other.write(RATIO_NS, "m:b", encodeRatio({ charsPerToken: 9, samples: 9 }), 0) as Op;
  b.store.apply(bad, 0);
  b.store.apply(own, 0);
  assert.deepEqual(b.ratios.models(), []);
});
