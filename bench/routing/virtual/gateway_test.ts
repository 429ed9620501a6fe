/**
 * The virtual gateway around real policies: a pick is charged at once (in flight, prefill
 * backlog), the backlog leaves at the first token and the slot at the end; characters per token
 * are learned from the engines' prompt counts; cache_aware's prediction is checked against what
 * the engine reports.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { renderChat } from "../../../lib/sim/chat_template.ts";
import { SimEngine } from "../../../lib/sim/engine.ts";
import { RatioTokenizer } from "../../../lib/sim/ratio_tokenizer.ts";
import { VirtualClock } from "./clock.ts";
import { type CallOutcome, type ChatCall, VirtualGateway } from "./gateway.ts";
import { workerUrls } from "./run.ts";
import { parseTarget, targetConfig } from "./targets.ts";
import { words } from "../workload.ts";
import { DEFAULTS } from "../../../support/sim_engine.ts";

const TOKENIZER = new RatioTokenizer(6);

/** A gateway with `policy` over `n` engines at the sim-worker defaults, time scale 1. */
function fleet(policy: string, n = 2) {
  const clock = new VirtualClock();
  const engines = Array.from({ length: n }, () =>
    new SimEngine(DEFAULTS, {
      now: () => clock.now(),
      sleep: (ms, signal) => clock.sleep(ms, signal),
      random: seededRandom(0),
      tokenizer: TOKENIZER,
    }));
  const urls = workerUrls(n);
  const config = targetConfig(parseTarget(policy), urls, 0);
  const gateway = new VirtualGateway({ config, clock, engines, urls, random: seededRandom(0) });
  const close = () => Promise.all(engines.map((e) => e.close()));
  return { clock, engines, gateway, close };
}

/** A chat call of about `tokens` tokens of seeded words. */
function call(seed: number, tokens: number, maxTokens = 4): ChatCall {
  const content = words(seededRandom(seed), tokens, "", 6);
  return {
    content,
    tokens: TOKENIZER.tokenize(renderChat([{ role: "user", content }])),
    maxTokens,
  };
}

Deno.test("virtual gateway: charged at the pick, backlog gone at the first token, slot at the end", async () => {
  const { clock, gateway, close } = fleet("round_robin");
  const c = call(1, 1000, 20);
  const seen: Record<string, [number, number]> = {};
  const w = gateway.workers[0];
  const look = (name: string) => (seen[name] = [w.inFlight, w.prefillTokens]);
  const done = gateway.send(c);
  look("picked");
  // The first token comes at the end of the prefill step: ~1,000 tokens at 8,000 tokens/s.
  clock.at(120, () => look("prefilling"));
  clock.at(130, () => look("decoding"));
  await clock.drive();
  const o = await done;
  look("ended");
  // Before any answer the gateway assumes 4 characters a token.
  const estimate = Math.ceil(c.content.length / 4);
  assert.deepEqual(seen, {
    picked: [1, estimate],
    prefilling: [1, estimate],
    decoding: [1, 0],
    ended: [0, 0],
  });
  assert.equal(o.ok, true);
  assert.equal(o.worker, 0);
  assert.equal(o.promptTokens, c.tokens.length);
  assert.ok(o.ttftMs! > 120 && o.ttftMs! < 130, String(o.ttftMs));
  assert.equal(o.prediction, null); // round robin predicts nothing
  await close();
});

Deno.test("virtual gateway: characters per token are learned from the engines' prompt counts", async () => {
  const { clock, gateway, close } = fleet("round_robin");
  assert.equal(gateway.ratios.forModel("sim-model"), 4);
  const calls = [1, 2, 3, 4, 5].map((seed) => call(seed, 300));
  const outcomes = Promise.all(calls.map((c) => gateway.send(c)));
  await clock.drive();
  await outcomes;
  const chars = calls.reduce((a, c) => a + c.content.length, 0);
  const tokens = calls.reduce((a, c) => a + c.tokens.length, 0);
  const learned = gateway.ratios.forModel("sim-model");
  assert.ok(Math.abs(learned - chars / tokens) < 0.2, `${learned} vs ${chars / tokens}`);
  assert.ok(learned > 5 && learned < 6.5, String(learned)); // 6 a token, less the template's
  await close();
});

Deno.test("virtual gateway: cache_aware sends a repeat where it is cached, and its prediction holds", async () => {
  const { clock, gateway, close } = fleet("cache_aware", 4);
  const c = call(7, 1500);
  const outcomes: CallOutcome[] = [];
  for (let i = 0; i < 3; i++) {
    const o = gateway.send(c);
    await clock.drive();
    outcomes.push(await o);
  }
  assert.ok(outcomes.every((o) => o.ok && o.worker === outcomes[0].worker));
  assert.equal(outcomes[0].cachedTokens, 0);
  assert.ok(outcomes[2].cachedTokens > 0.9 * c.tokens.length, String(outcomes[2].cachedTokens));
  const check = outcomes[2].prediction!;
  assert.ok(Math.abs(check.error) <= 0.05, String(check.error));
  assert.equal(check.reported, outcomes[2].cachedTokens);
  await close();
});
