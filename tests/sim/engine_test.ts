/**
 * The simulated engine's timing on a virtual clock: prefill cost from uncached tokens, queueing,
 * batch-dependent inter-token time, chunked prefill, time scale, abort, close, determinism and
 * the stats snapshot. Cache behaviour is in engine_cache_test.ts.
 */

import assert from "node:assert/strict";
import { SimEngine } from "../../lib/sim/engine.ts";
import { DEFAULTS, near, prompt, run, virtualEngine } from "../../support/sim_engine.ts";

/** Mean gap between consecutive token times. */
const itl = (at: number[]) => (at[at.length - 1] - at[0]) / (at.length - 1);

Deno.test("engine: a lone 1000-token uncached prompt at 8000 tok/s has a 125 ms TTFT", async () => {
  const sim = virtualEngine();
  const { result, ids } = await run(sim, prompt(1, 1000), 3);
  assert.deepEqual(result, {
    promptTokens: 1000,
    cachedTokens: 0,
    completionTokens: 3,
    finishReason: "length",
    ttftMs: 125,
    queueMs: 0,
  });
  assert.equal(ids.length, 3);
  near(sim.clock.t, 125 + 2 * 6.35);
});

Deno.test("engine: TTFT grows with uncached prompt tokens, in proportion to prefillTps", async () => {
  const sim = virtualEngine();
  const ttft = async (salt: number, n: number) =>
    (await run(sim, prompt(salt, n), 1)).result.ttftMs!;
  near(await ttft(1, 400), 50);
  near(await ttft(2, 1600), 200);
  near(await ttft(3, 2000), 250);
  // A long shared prefix: only the 400 new tokens (plus the part block) cost prefill.
  const shared = prompt(4, 1600);
  await run(sim, shared, 1);
  const r = await run(sim, [...shared, ...prompt(5, 400)], 1);
  assert.equal(r.result.cachedTokens, 1600);
  near(r.result.ttftMs!, 50);
});

Deno.test("engine: a prompt longer than prefillChunk prefills in chunks, stalling decodes", async () => {
  const sim = virtualEngine();
  const decoder = run(sim, prompt(1, 16), 30);
  const long = run(sim, prompt(2, 5000), 1, {});
  const [d, l] = await Promise.all([decoder, long]);
  // Both prefill in step 1 (2032 of the long prompt's tokens), then 2048 and 920 more.
  near(l.result.ttftMs!, 5016 / 8000 * 1000);
  const gaps = d.at.slice(1).map((t, i) => t - d.at[i]);
  near(Math.max(...gaps), 2048 / 8);
  near(Math.min(...gaps), 6 + 0.35);
});

Deno.test("engine: TTFT grows with queue depth when the batch is full", async () => {
  const sim = virtualEngine({ maxRunning: 1 });
  const runs = await Promise.all([1, 2, 3, 4].map((salt) => run(sim, prompt(salt, 800), 10)));
  const service = 100 + 9 * 6.35; // prefill, then 9 decode steps
  runs.forEach((r, i) => {
    near(r.result.queueMs, i * service);
    near(r.result.ttftMs!, i * service + 100);
  });
});

Deno.test("engine: admission waits for prefill budget, so a burst mostly waits", async () => {
  const sim = virtualEngine({ prefillChunk: 1000 });
  const seen: number[] = [];
  const runs = [1, 2, 3].map((salt) =>
    run(sim, prompt(salt, 1000), 2, { onToken: () => seen.push(sim.engine.stats().waiting) })
  );
  await Promise.all(runs);
  // One admission per step: each first token sees the requests still behind it.
  assert.deepEqual(seen, [2, 1, 1, 0, 0, 0]);
});

Deno.test("engine: inter-token time grows with the batch size", async () => {
  const alone = virtualEngine();
  near(itl((await run(alone, prompt(1, 20), 20)).at), 6.35);
  const busy = virtualEngine();
  const runs = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((s) => run(busy, prompt(s, 20), 20)));
  for (const r of runs) near(itl(r.at), 6 + 0.35 * 8, 0.5);
  near(itl(runs[0].at.slice(2, 12)), 6 + 0.35 * 8);
});

Deno.test("engine: timeScale scales wall time, not the reported simulated times", async () => {
  for (const timeScale of [0.5, 0.01, 0]) {
    const sim = virtualEngine({ timeScale });
    const { result } = await run(sim, prompt(1, 1000), 101);
    near(result.ttftMs!, 125);
    near(sim.clock.t, timeScale * (125 + 100 * 6.35), 1);
    assert.ok(sim.clock.sleeps.every((ms) => ms === 0 || ms >= 1), String(sim.clock.sleeps));
  }
});

Deno.test("engine: abort frees the batch slot at once; a queued abort never runs", async () => {
  const sim = virtualEngine({ maxRunning: 1 });
  const ac = new AbortController();
  const queued = new AbortController();
  const a = run(sim, prompt(1, 80), 1000, {
    signal: ac.signal,
    onToken: (i) => i === 2 && ac.abort(),
  });
  const b = run(sim, prompt(2, 80), 2);
  const c = run(sim, prompt(3, 80), 2, { signal: queued.signal });
  queued.abort();
  const [ra, rb, rc] = await Promise.all([a, b, c]);
  assert.equal(ra.result.finishReason, "abort");
  assert.equal(ra.result.completionTokens, 3);
  near(rb.result.queueMs, 10 + 2 * 6.35, 1e-6);
  assert.deepEqual(rc.result, {
    promptTokens: 80,
    cachedTokens: 0,
    completionTokens: 0,
    finishReason: "abort",
    ttftMs: null,
    queueMs: 0,
  });
  assert.equal(rc.ids.length, 0);
  const pre = new AbortController();
  pre.abort();
  assert.equal((await run(sim, prompt(4, 80), 2, { signal: pre.signal })).result.ttftMs, null);
  const s = sim.engine.stats();
  assert.deepEqual(s.totals, {
    requests: 4,
    promptTokens: 160,
    cachedTokens: 0,
    generatedTokens: 5,
    aborted: 3,
    firstTokens: 2,
    ttftMs: ra.result.ttftMs! + rb.result.ttftMs!,
  });
  // Nothing running: all that is left is the whole blocks A (80 + 2) and B (80 + 1) computed.
  assert.equal(s.running, 0);
  assert.equal(s.residentTokens, 10 * 16);
  assert.equal(s.usedTokens, 0, "cached blocks nobody runs on are evictable, not in use");
});

Deno.test("engine: abort returns the KV reservation, letting a waiting request in", async () => {
  const sim = virtualEngine({ kvTokens: 512 });
  const ac = new AbortController();
  const big = run(sim, prompt(1, 100), 300, {
    signal: ac.signal,
    onToken: (i) => {
      const s = sim.engine.stats();
      if (i === 0) {
        assert.deepEqual([s.running, s.waiting], [1, 1], "190+10 does not fit beside 400");
      }
      if (i === 3) ac.abort();
    },
  });
  const waiter = run(sim, prompt(2, 190), 10);
  const [rb, rw] = await Promise.all([big, waiter]);
  assert.equal(rb.result.finishReason, "abort");
  near(rw.result.queueMs, 12.5 + 3 * 6.35);
  assert.equal(rw.result.finishReason, "length");
});

Deno.test("engine: a throwing onToken aborts its request like a client going away", async () => {
  const sim = virtualEngine();
  const result = await sim.engine.submit({ tokens: prompt(1, 40), maxNewTokens: 9 }, (_, i) => {
    if (i === 1) throw new Error("stream closed");
  });
  assert.equal(result.finishReason, "abort");
  assert.equal(result.completionTokens, 2);
  assert.equal(sim.engine.stats().totals.aborted, 1);
});

Deno.test("engine: the same inputs and seed give the same tokens and timings", async () => {
  const scenario = async () => {
    const sim = virtualEngine({ maxRunning: 3, kvTokens: 2048 }, 42);
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => run(sim, prompt(i % 3, 200 + 50 * i), 5 + i)),
    );
    return { runs, stats: sim.engine.stats(), t: sim.clock.t };
  };
  assert.deepEqual(await scenario(), await scenario());
});

Deno.test("engine: without a random source, output is a function of the prompt", async () => {
  const make = () => new SimEngine(DEFAULTS, { now: () => 0, sleep: () => Promise.resolve() });
  const ids = async (e: SimEngine, tokens: number[]) => {
    const out: number[] = [];
    await e.submit({ tokens, maxNewTokens: 8 }, (id) => out.push(id));
    return out;
  };
  const [e1, e2] = [make(), make()];
  assert.deepEqual(await ids(e1, prompt(1, 50)), await ids(e2, prompt(1, 50)));
  assert.notDeepEqual(await ids(e1, prompt(1, 50)), await ids(e1, prompt(2, 50)));
});

Deno.test("engine: stats agree with the batch, the queue and the KV pool", async () => {
  const sim = virtualEngine({ maxRunning: 2 });
  let mid: ReturnType<SimEngine["stats"]> | null = null;
  const runs = [
    run(sim, prompt(1, 100), 50, { onToken: (i) => i === 10 && (mid = sim.engine.stats()) }),
    run(sim, prompt(2, 200), 50),
    run(sim, prompt(3, 300), 5),
  ];
  const done = await Promise.all(runs);
  const s = mid!;
  assert.equal(s.running, 2);
  assert.equal(s.waiting, 1);
  assert.equal(s.waitingUncachedTokens, 300);
  // Prompt blocks (6 + 12) are cached; private: 4 + 8 prompt tokens and 10 generated tokens each.
  // Prompt blocks (6 + 12) are cached and pinned. Private: r1 has 4 prompt tokens and 10 of its
  // 11 tokens (the newest has no KV yet); r2, not yet at its 11th token, 8 and 9.
  assert.equal(s.usedTokens, (6 + 12) * 16 + (4 + 10) + (8 + 9));
  assert.equal(s.residentTokens, s.usedTokens, "every cached block is pinned by a runner");
  assert.equal(s.tokenUsage, s.usedTokens / 65536);
  assert.equal(s.maxTokens, 65536);
  assert.equal(s.maxRunning, 2);
  const end = sim.engine.stats();
  assert.equal(end.running + end.waiting, 0);
  assert.deepEqual(end.totals, {
    requests: 3,
    promptTokens: 600,
    cachedTokens: 0,
    generatedTokens: 105,
    aborted: 0,
    firstTokens: 3,
    ttftMs: done.reduce((a, r) => a + r.result.ttftMs!, 0),
  });
  assert.equal(end.residentTokens % 16, 0, "only whole cached blocks remain");
  assert.ok(end.residentTokens > 0);
  assert.equal(end.usedTokens, 0, "and none is in use");
  const held = end.genThroughput;
  assert.ok(held > 0);
  sim.clock.t += 20_000;
  assert.equal(sim.engine.stats().genThroughput, held, "held while idle, as sglang's gauge");
});

Deno.test("engine: genThroughput is decode tokens per wall second", async () => {
  for (const timeScale of [1, 0.5]) {
    const sim = virtualEngine({ timeScale });
    await run(sim, prompt(1, 10), 1 + 1000 / timeScale); // 6.35 wall s: the meter has settled
    near(sim.engine.stats().genThroughput, 1000 / 6.35 / timeScale, 0.01 * 1000 / 6.35 / timeScale);
  }
});

Deno.test("engine: close aborts pending requests and refuses new ones", async () => {
  const sim = virtualEngine({ maxRunning: 1 });
  const a = run(sim, prompt(1, 100), 1000, { onToken: (i) => i === 1 && void sim.engine.close() });
  const b = run(sim, prompt(2, 100), 10);
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(ra.result.finishReason, "abort");
  assert.equal(rb.result.finishReason, "abort");
  assert.equal(sim.engine.stats().totals.aborted, 0, "closing is not a client abort");
  await sim.engine.close();
  await assert.rejects(run(sim, prompt(3, 10), 1), /closed/);
});

Deno.test("engine: onFinish hears every request end, finished or aborted, until removed", async () => {
  const sim = virtualEngine();
  let ends = 0;
  const off = sim.engine.onFinish(() => ends++);
  await run(sim, prompt(1, 100), 2);
  assert.equal(ends, 1);
  await run(sim, prompt(2, 100), 1000, { onToken: () => assert.fail("the client is gone") });
  assert.equal(ends, 2, "an aborted request ends too");
  off();
  await run(sim, prompt(3, 100), 1);
  assert.equal(ends, 2);
});

Deno.test("engine: close cuts short the step's sleep through the abort signal", async () => {
  let sleeping = () => {};
  const asleep = new Promise<void>((r) => (sleeping = r));
  let calls = 0;
  const engine = new SimEngine(DEFAULTS, {
    now: () => 0,
    // The first sleep (prefill) returns; the second ends only when its signal aborts.
    sleep: (_ms, signal) =>
      calls++ === 0 ? Promise.resolve() : new Promise<void>((_, reject) => {
        signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
        sleeping();
      }),
  });
  const result = engine.submit({ tokens: prompt(1, 8), maxNewTokens: 1000 }, () => {});
  await asleep;
  await engine.close();
  assert.equal((await result).finishReason, "abort");
});

Deno.test("engine: bad input and bad settings fail loudly", async () => {
  const sim = virtualEngine();
  await assert.rejects(run(sim, [], 1), /no tokens/);
  await assert.rejects(run(sim, prompt(1, 5), -1), /maxNewTokens -1/);
  await assert.rejects(run(sim, prompt(1, 5), 1.5), RangeError);
  const deps = { now: () => 0, sleep: () => Promise.resolve() };
  assert.throws(() => new SimEngine({ ...DEFAULTS, blockSize: 0 }, deps), /blockSize .* got 0/);
  assert.throws(() => new SimEngine({ ...DEFAULTS, prefillTps: 0 }, deps), /prefillTps/);
  assert.throws(() => new SimEngine({ ...DEFAULTS, timeScale: -1 }, deps), /timeScale/);
  const zero = await run(sim, prompt(2, 40), 0);
  assert.equal(zero.result.completionTokens, 0);
  near(zero.result.ttftMs!, 5);
});

Deno.test("engine: a prompt whose KV was transferred (PD decode side) skips prefill", async () => {
  const sim = virtualEngine();
  const tokens = prompt(42, 2000);
  const r = await sim.engine.submit({ tokens, maxNewTokens: 2, kvTransferred: true }, () => {});
  // No 250 ms prefill: the first token comes after one (empty-batch) step.
  assert.ok(r.ttftMs! < 10, `ttft ${r.ttftMs}`);
  assert.equal(r.completionTokens, 2);
  // Its KV is in the cache now, as if prefilled here.
  const again = await run(sim, tokens, 1);
  assert.equal(again.result.cachedTokens, 1984);
  await sim.engine.close();
});
