/** The routing benchmark's report: the mean TTFT floor of a trace window, the workers' own TTFT. */

import assert from "node:assert/strict";
import type { RequestRecord } from "./client.ts";
import { parseCounters } from "./fleet.ts";
import { engineTtftMs, followUpHit, ttftFloorMs } from "./report.ts";

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

Deno.test("report: the workers' own TTFT is their summed first-token seconds over their count, in wall ms", () => {
  const text = (sum: number, count: number) =>
    [
      'sglang:prompt_tokens_total{model_name="m"} 100',
      'sglang:cached_tokens_total{model_name="m"} 40',
      'sglang:generation_tokens_total{model_name="m"} 9',
      'sglang:num_requests_total{model_name="m"} 3',
      "# TYPE sglang:time_to_first_token_seconds summary",
      `sglang:time_to_first_token_seconds_sum{model_name="m"} ${sum}`,
      `sglang:time_to_first_token_seconds_count{model_name="m"} ${count}`,
    ].join("\n");
  const workers = [parseCounters(text(0.3, 2)), parseCounters(text(0.5, 2))];
  assert.equal(engineTtftMs(workers, []), 200, "(0.3 + 0.5) s ÷ 4");
  assert.equal(engineTtftMs(workers, ["--time-scale", "4", "--time-scale", "0.5"]), 100);
  const old = parseCounters(text(0, 0).split("\n").slice(0, 4).join("\n"));
  assert.equal(old.firstTokens, 0, "an older worker without the counters reads as none");
  assert.equal(engineTtftMs([old], []), null);
});
