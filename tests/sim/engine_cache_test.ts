/**
 * The simulated engine's prefix cache as a client sees it through `cachedTokens`: repeats and
 * multi-turn conversations hit, concurrent requests share a computed prefix, LRU eviction under
 * pressure spares pinned prefixes, and flush. Split from engine_test.ts for size.
 */

import assert from "node:assert/strict";
import { renderChat } from "../../lib/sim/chat_template.ts";
import { detokenize, tokenize } from "../../lib/sim/tokenizer.ts";
import { near, prompt, run, virtualEngine } from "../../support/sim_engine.ts";

Deno.test("engine cache: a prompt seen before is served from cache, in whole blocks", async () => {
  const sim = virtualEngine();
  const p = prompt(1, 1000);
  assert.equal((await run(sim, p, 4)).result.cachedTokens, 0);
  const again = (await run(sim, p, 4)).result;
  assert.equal(again.cachedTokens, Math.floor(1000 / 16) * 16);
  near(again.ttftMs!, 8 / 8000 * 1000);
  near(sim.engine.stats().cacheHitRate, 0.1 * 992 / 1000);
  // As in sglang and vLLM the last prompt token is always computed, so a prompt of whole blocks
  // gets all but its last block.
  const whole = prompt(2, 64);
  await run(sim, whole, 1);
  assert.equal((await run(sim, whole, 1)).result.cachedTokens, 48);
});

Deno.test("engine cache: a multi-turn conversation sending the reply back hits its history", async () => {
  const sim = virtualEngine();
  const messages = [
    { role: "system", content: "You are a helpful assistant. ".repeat(20) },
    { role: "user", content: "Summarise the plot of a long novel in detail, please." },
  ];
  let history = 0;
  for (let turn = 0; turn < 4; turn++) {
    const tokens = tokenize(renderChat(messages));
    const { result, ids } = await run(sim, tokens, 60);
    if (turn > 0) {
      assert.ok(result.cachedTokens >= Math.floor((history - 1) / 16) * 16, `turn ${turn}`);
      assert.ok(result.cachedTokens / tokens.length > 0.85, `turn ${turn}`);
    }
    const reply = detokenize(ids);
    assert.deepEqual(tokenize(reply), ids);
    messages.push({ role: "assistant", content: reply }, { role: "user", content: "Go on." });
    history = tokens.length + ids.length;
  }
});

Deno.test("engine cache: a request arriving after another's prefill shares its prompt", async () => {
  const sim = virtualEngine();
  const p = prompt(1, 1000);
  let second: Promise<{ result: { cachedTokens: number } }> | null = null;
  const first = await run(sim, p, 5, { onToken: (i) => i === 0 && (second = run(sim, p, 5)) });
  assert.equal(first.result.cachedTokens, 0);
  assert.equal((await second!).result.cachedTokens, 992);
});

Deno.test("engine cache: under pressure the least recently used prefix is evicted", async () => {
  const sim = virtualEngine({ kvTokens: 256 }); // 16 blocks
  const [a, b, c] = [prompt(1, 100), prompt(2, 100), prompt(3, 100)]; // 6 blocks each
  await run(sim, a, 1);
  await run(sim, b, 1);
  assert.equal(sim.engine.stats().residentTokens, 12 * 16);
  assert.equal(sim.engine.stats().usedTokens, 0, "idle: every cached block is evictable");
  await run(sim, c, 1); // needs 101 tokens of room: 3 of A's blocks go, its tail first
  assert.equal((await run(sim, b, 1)).result.cachedTokens, 96);
  assert.equal((await run(sim, a, 1)).result.cachedTokens, 48);
  assert.ok(sim.engine.stats().residentTokens <= 256);
});

Deno.test("engine cache: a prefix pinned by a running request is not evicted; others wait", async () => {
  const sim = virtualEngine({ kvTokens: 256 });
  const x = prompt(1, 100);
  await run(sim, x, 1);
  const t0 = sim.clock.t;
  let during: ReturnType<typeof sim.engine.stats> | null = null;
  const d = run(sim, x, 50, { onToken: (i) => i === 20 && (during = sim.engine.stats()) });
  const f = run(sim, prompt(2, 200), 1); // 201 tokens: fits only if D's prefix were evicted
  const [rd, rf] = await Promise.all([d, f]);
  assert.equal(rd.result.cachedTokens, 96);
  assert.deepEqual([during!.running, during!.waiting, during!.waitingUncachedTokens], [1, 1, 200]);
  assert.ok(during!.usedTokens >= 6 * 16, "the runner's pinned prefix is in use");
  near(rf.result.queueMs, rd.at[rd.at.length - 1] - t0, 1e-6);
  assert.equal(rf.result.finishReason, "length");
});

Deno.test("engine cache: an empty engine admits a prompt larger than the whole cache", async () => {
  const sim = virtualEngine({ kvTokens: 256 });
  const { result } = await run(sim, prompt(1, 1000), 3);
  assert.equal(result.finishReason, "length");
  near(result.ttftMs!, 125);
  assert.equal(sim.engine.stats().residentTokens, 256, "the cache keeps what fits");
  assert.equal((await run(sim, prompt(1, 1000), 1)).result.cachedTokens, 256);
});

Deno.test("engine cache: flush refuses while busy, then empties the cache", async () => {
  const sim = virtualEngine();
  const p = prompt(1, 300);
  let busy: boolean | null = null;
  await run(sim, p, 3, { onToken: () => (busy ??= sim.engine.flushCache()) });
  assert.equal(busy, false);
  assert.ok(sim.engine.stats().residentTokens > 0);
  assert.equal(sim.engine.flushCache(), true);
  assert.equal(sim.engine.stats().residentTokens, 0);
  assert.equal((await run(sim, p, 1)).result.cachedTokens, 0);
});
