/**
 * The regular attempt's pick and charge as one step: requests decided in the same turn of the
 * event loop each see the load the earlier ones put on their workers (in flight, prefill
 * backlog), whatever the protocol, so a burst spreads as the policy's scores say instead of
 * piling where a stale score pointed. No server: the proxy as a handler over a fake fetch.
 */

import assert from "node:assert/strict";
import { burstFleet } from "../support/burst.ts";

Deno.test("regular: a burst decided in one turn spreads evenly under least_load (each pick is charged before the next)", async () => {
  const t = burstFleet(4);
  await t.burst(8);
  const per = new Map<string, number>();
  for (const u of t.calls) per.set(u, (per.get(u) ?? 0) + 1);
  assert.deepEqual(
    [...per.values()],
    [2, 2, 2, 2],
    `8 requests over 4 idle workers: ${JSON.stringify([...per])}`,
  );
  for (const w of t.registry.all()) {
    assert.equal(w.inFlight, 0, "every slot given back");
    assert.equal(w.prefillTokens, 0, "every backlog charge given back");
  }
});
