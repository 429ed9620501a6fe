/**
 * One target's virtual replay on a tiny fleet: the same seed gives the same run, request for
 * request; repeated prompts hit the cache under cache_aware; the window's counters and the drain
 * cut behave as `bench:routing`'s.
 */

import assert from "node:assert/strict";
import { renderChat } from "../../../lib/sim/chat_template.ts";
import { RatioTokenizer } from "../../../lib/sim/ratio_tokenizer.ts";
import { replayPlan } from "../replay.ts";
import type { TraceRequest } from "../trace.ts";
import { BlockTexts, tracePrompt } from "../trace_prompts.ts";
import { type ReplayInput, replayVirtual } from "./replay.ts";
import { summariseVirtual } from "./report.ts";
import { workerUrls } from "./run.ts";
import { parseTarget, targetConfig } from "./targets.ts";
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

/**
 * 5 conversations of 7 turns, a turn every 200 ms round them (5 and the routers' 3 share no
 * factor, so a conversation's turns go round the routers): each turn's prompt is its
 * conversation's 2 full blocks and a partial third block of its own, as a trace names a turn's
 * partial tail anew, so the next turn shares all but that tail.
 */
function conversations(): TraceRequest[] {
  return Array.from({ length: 35 }, (_, i) => {
    const c = i % 5;
    return {
      timestampMs: 200 * i,
      inputLength: 1024 + 300,
      outputLength: 4,
      hashIds: [100 * c, 100 * c + 1, 10_000 + i],
    };
  });
}

/** The conversations replayed through `target` (its `#N` routers; a mesh rounds every 100 ms). */
function routed(target: string): ReplayInput {
  const requests = conversations();
  const blocks = new BlockTexts(0, 64, CPT);
  const prompts = requests.map((r) => tracePrompt(blocks, r));
  const t = parseTarget(target);
  return {
    ...input("cache_aware"),
    requests,
    plan: replayPlan(requests, { speed: 1, warmup: 5, durationS: 60, maxRequests: null }),
    prompt: (i) => prompts[i],
    tokens: (i) => TOKENIZER.tokenize(renderChat([{ role: "user", content: prompts[i] }])),
    config: targetConfig(t, workerUrls(3), 0),
    routers: t.routers,
    mesh: t.mesh ? { roundMs: 100, loadMs: 50 } : null,
  };
}

Deno.test("virtual replay: three routers on a mesh find the cache one router finds; without it they do not", async () => {
  const keys = conversations().map((r) => `b${r.hashIds[0]}`);
  const hit = async (target: string) =>
    summariseVirtual(target, await replayVirtual(routed(target)), 3, keys).followUpHit!;
  const [one, alone, mesh] = [
    await hit("cache_aware"),
    await hit("cache_aware#3"),
    await hit("cache_aware#3-mesh"),
  ];
  // Each follow-up shares 1,024 of its ~1,330 tokens with the turn before.
  assert.ok(one > 0.6, `one router: ${one}`);
  assert.ok(alone < 0.8 * one, `three alone: ${alone} against ${one}`);
  assert.ok(mesh >= 0.95 * one, `three on a mesh: ${mesh} against ${one}`);
});

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
