/** The routing benchmark's report: the mean TTFT floor of a trace window. */

import assert from "node:assert/strict";
import type { RequestRecord } from "../../../bench/routing/client.ts";
import { followUpHit, ttftFloorMs } from "../../../bench/routing/report.ts";

Deno.test("report: the TTFT floor is the uncached share of the mean prompt at the wall-clock prefill speed", () => {
  const sim = ["--prefill-tps", "8000", "--time-scale", "2", "--prefill-tps", "48000"];
  // 12,000 tokens, a quarter cached at best: 9,000 at 24,000 tokens/s of wall clock.
  assert.equal(ttftFloorMs(12_000, 0.25, sim), 375);
  assert.equal(ttftFloorMs(12_000, 0.25, ["--prefill-tps", "6000"]), 1500, "no time scale: 1");
  assert.equal(ttftFloorMs(null, 0.25, sim), null);
  assert.equal(ttftFloorMs(12_000, null, sim), null);
  assert.equal(ttftFloorMs(12_000, 0.25, []), null, "no prefill speed");
});

Deno.test("report: the follow-ups' hit counts requests of a conversation sent before, warm-up included", () => {
  const rec = (
    conversation: string | undefined,
    sentAtMs: number,
    cached: number,
    more: Partial<RequestRecord> = {},
  ): RequestRecord => ({
    ok: true,
    status: 200,
    error: null,
    ttftMs: 1,
    e2eMs: 2,
    usage: { promptTokens: 100, completionTokens: 1, cachedTokens: cached },
    session: "s",
    turn: 0,
    tenant: null,
    conversation,
    sentAtMs,
    measured: true,
    ...more,
  });
  // Recorded in the order they ended; sent: a (warm-up), b, a, b, c, a (failed), none.
  const records = [
    rec("a", 30, 90),
    rec("a", 0, 0, { measured: false }),
    rec("b", 40, 50),
    rec("b", 10, 80),
    rec("c", 50, 0),
    rec("a", 60, 0, { ok: false, usage: null }),
    rec(undefined, 70, 100),
  ];
  // Follow-ups: a at 30 (90 of 100) and b at 40 (50 of 100).
  assert.equal(followUpHit(records), 0.7);
  assert.equal(followUpHit([rec("a", 0, 10), rec("b", 1, 20)]), null, "no follow-up");
});
