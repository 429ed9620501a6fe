/**
 * The raw HTTP/1.1 framing fuzzer, a bounded seeded run (`support/fuzz/http_framing.ts`
 * for the inputs and oracles; `deno task bench:fuzz` runs it long).
 */

import assert from "node:assert/strict";
import { formatReport, runFamily } from "../../support/fuzz/driver.ts";
import { httpFraming } from "../../support/fuzz/http_framing.ts";

Deno.test("fuzz http: mutated HTTP/1.1 framing gets clean answers, no hang, nothing smuggled", async () => {
  const r = await runFamily(httpFraming, { seed: 20260, inputs: 8000 });
  assert.equal(r.violations.length, 0, formatReport(r));
  assert.equal(r.inputs, 8000);
});
