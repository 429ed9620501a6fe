/**
 * The worker-API fuzzer, a bounded seeded run (`support/fuzz/workers_api.ts` for the
 * inputs and oracles; `deno task bench:fuzz` runs it long).
 */

import assert from "node:assert/strict";
import { formatReport, runFamily } from "../../support/fuzz/driver.ts";
import { workersApi } from "../../support/fuzz/workers_api.ts";

Deno.test("fuzz workers: mutated worker-API requests never 5xx and change the registry only when accepted", async () => {
  const r = await runFamily(workersApi, { seed: 20260, inputs: 4000 });
  assert.equal(r.violations.length, 0, formatReport(r));
  assert.equal(r.inputs, 4000);
  assert.ok((r.histogram.get("POST 202") ?? 0) > 0, formatReport(r));
});
