/**
 * The inference-body fuzzer, a bounded seeded run (`support/fuzz/json_bodies.ts` for the
 * inputs and oracles; `deno task bench:fuzz` runs it long).
 */

import assert from "node:assert/strict";
import { formatReport, runFamily } from "../../support/fuzz/driver.ts";
import { jsonBodies } from "../../support/fuzz/json_bodies.ts";

Deno.test("fuzz json: mutated bodies on every inference route get 2xx or a 4xx envelope, never 5xx", async () => {
  // The seed picks the policy: 20264 routes with cache_aware, which reads the bodies' text.
  const r = await runFamily(jsonBodies, { seed: 20264, inputs: 6000 });
  assert.equal(r.violations.length, 0, formatReport(r));
  assert.equal(r.inputs, 6000);
  assert.ok(
    (r.histogram.get("200") ?? 0) > 0 && (r.histogram.get("400") ?? 0) > 0,
    formatReport(r),
  );
});
