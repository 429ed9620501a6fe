/**
 * One target's virtual replay on a tiny fleet: the same seed gives the same run, request for
 * request; repeated prompts hit the cache under cache_aware; the window's counters and the drain
 * cut behave as `bench:routing`'s.
 */

import assert from "node:assert/strict";
import { renderChat } from "../../../../lib/sim/chat_template.ts";
import { RatioTokenizer } from "../../../../lib/sim/ratio_tokenizer.ts";
import { replayPlan } from "../../../../bench/routing/replay.ts";
import type { TraceRequest } from "../../../../bench/routing/trace.ts";
import { BlockTexts, tracePrompt } from "../../../../bench/routing/trace_prompts.ts";
import { type ReplayInput, replayVirtual } from "../../../../bench/routing/virtual/replay.ts";
import { summariseVirtual } from "../../../../bench/routing/virtual/report.ts";
import { workerUrls } from "../../../../bench/routing/virtual/run.ts";
import { parseTarget, targetConfig } from "../../../../bench/routing/virtual/targets.ts";
import { DEFAULTS } from "../../../support/sim_engine.ts";

const CPT = 4;
const TOKENIZER = new RatioTokenizer(CPT);

/**
 * 24 requests 250 ms apart: three conversations of 2-block prompts, each asked four times over,
 * and 12 one-off prompts between them.
 */
function trace(): TraceRequest[] {
  return Array.from({ length: 24 }, (_, i) => {
    const repeat = i % 2 === 0;
    const base = repeat ? 1000 * ((i / 2) % 3) : 5000 + 10 * i;
    return { timestampMs: 250 * i, inputLength: 1000, outputLength: 8, hashIds: [base, base + 1] };
  });
}

/** The replay of `target` on 3 workers, 6 warm-up requests, the rest measured. */
function input(target: string, seed = 0, drainS = 30): ReplayInput {
  const requests = trace();
  const blocks = new BlockTexts(seed, 64, CPT);
  const prompts = requests.map((r) => tracePrompt(blocks, r));
  const tokens = prompts.map((content) =>
    TOKENIZER.tokenize(renderChat([{ role: "user", content }]))
  );
  const t = parseTarget(target);
  return {
    requests,
    plan: replayPlan(requests, { speed: 1, warmup: 6, durationS: 60, maxRequests: null }),
    prompt: (i) => prompts[i],
    tokens: (i) => tokens[i],
    keys: t.affinity ? requests.map((r) => `b${r.hashIds[0]}`) : null,
    engine: { ...DEFAULTS, kvTokens: 16_384, timeScale: 2 },
    engineSeed: seed,
    tokenizer: TOKENIZER,
    config: targetConfig(t, workerUrls(3), seed),
    seed,
    drainMs: drainS * 1000,
    together: false,
  };
}

const byIndex = <T extends { index: number }>(xs: T[]) => [...xs].sort((a, b) => a.index - b.index);

Deno.test("virtual replay: the same seed gives the same run, request for request", async () => {
  for (const target of ["cache_aware", "power_of_two", "ref:affinity"]) {
    const a = await replayVirtual(input(target));
    const b = await replayVirtual(input(target));
    assert.equal(a.records.length, 24);
    assert.deepEqual(byIndex(a.records), byIndex(b.records), target);
    assert.deepEqual([a.events, a.virtualMs, a.after], [b.events, b.virtualMs, b.after], target);
  }
});

Deno.test("virtual replay: cache_aware serves repeated prompts from the cache", async () => {
  const r = await replayVirtual(input("cache_aware"));
  const s = summariseVirtual("cache_aware", r, 3);
  assert.equal(s.sent, 18);
  assert.equal(s.failed, 0);
  // 9 of the measured requests repeat a prompt sent before: each finds nearly all of it cached.
  assert.ok(s.cacheHit! > 0.4, String(s.cacheHit));
  for (const x of r.records.filter((x) => x.measured && x.index % 2 === 0)) {
    assert.ok(x.cachedTokens > 0.9 * x.promptTokens, `request ${x.index}: ${x.cachedTokens}`);
  }
  assert.ok(s.prediction !== null && s.prediction.within5 > 0.8, JSON.stringify(s.prediction));
  assert.equal(s.ttftMeanMs !== null && s.ttftMeanMs > 0, true);
});

Deno.test("virtual replay: the window's counters start at its first arrival", async () => {
  const r = await replayVirtual(input("round_robin"));
  const sum = (xs: { promptTokens: number }[]) => xs.reduce((a, x) => a + x.promptTokens, 0);
  const probe = TOKENIZER.tokenize(renderChat([{ role: "user", content: "ping" }])).length;
  const warm = r.records.filter((x) => !x.measured);
  const measured = r.records.filter((x) => x.measured);
  // At 4 requests a second the fleet is idle at each arrival: admissions follow arrivals.
  assert.equal(sum(r.before), probe + sum(warm));
  assert.equal(sum(r.after) - sum(r.before), sum(measured));
});

Deno.test("virtual replay: the drain cuts what is still running, counted as failed", async () => {
  const long = input("round_robin", 0, 0);
  long.requests = long.requests.map((r, i) => i === 23 ? { ...r, outputLength: 10_000 } : r);
  const r = await replayVirtual(long);
  assert.equal(r.cut, 1);
  const s = summariseVirtual("round_robin", r, 3);
  assert.deepEqual([s.sent, s.ok, s.failed], [18, 17, 1]);
});
