/** The routing benchmark's report: the mean TTFT floor of a trace window. */

import assert from "node:assert/strict";
import { ttftFloorMs } from "../../../bench/routing/report.ts";

Deno.test("report: the TTFT floor is the uncached share of the mean prompt at the wall-clock prefill speed", () => {
  const sim = ["--prefill-tps", "8000", "--time-scale", "2", "--prefill-tps", "48000"];
  // 12,000 tokens, a quarter cached at best: 9,000 at 24,000 tokens/s of wall clock.
  assert.equal(ttftFloorMs(12_000, 0.25, sim), 375);
  assert.equal(ttftFloorMs(12_000, 0.25, ["--prefill-tps", "6000"]), 1500, "no time scale: 1");
  assert.equal(ttftFloorMs(null, 0.25, sim), null);
  assert.equal(ttftFloorMs(12_000, null, sim), null);
  assert.equal(ttftFloorMs(12_000, 0.25, []), null, "no prefill speed");
});
