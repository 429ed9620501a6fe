/**
 * The prefill backlog the gateway keeps per worker (`Worker.prefillTokens`, what the default
 * `--wait-model backlog` ranks by): a request's tokens count from dispatch until the worker's
 * first streamed bytes (a whole answer: its head), or until it fails or its client leaves; and
 * the cache prediction check (`smg_policy_cache_prediction_error`) against the cached tokens
 * simulated workers report, which each worker keeps a count of.
 */

import assert from "node:assert/strict";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { startSimWorker } from "../../lib/sim/worker.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";

const chat = (content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "test-model", messages: [{ role: "user", content }], ...extra });

Deno.test("backlog: a request counts its prompt on the worker until the first streamed bytes", async () => {
  const w = new FakeWorker({ chunks: 3 });
  const g = await startGateway([w.url], { policy: "least_load" });
  try {
    const worker = g.gw.registry.byUrl(w.url)!;
    // Hanging: the tokens stay counted while the worker has not answered.
    w.opts.mode = { kind: "hang" };
    const leave = new AbortController();
    const pending = fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      body: chat("x".repeat(400), { stream: true }),
      signal: leave.signal,
    }).catch(() => null);
    await until(() => w.seen.requests === 1, (l) => w.subscribe(l), "the worker got the request");
    assert.equal(worker.prefillTokens, 100, "400 characters at 4 a token");
    assert.equal(worker.inFlight, 1);
    leave.abort();
    await pending;
    await within(worker.idle(), "the client left: the worker is freed");
    assert.equal(worker.prefillTokens, 0);

    // Streaming: the first bytes end the prefill; the stream itself is still in flight.
    w.opts.mode = { kind: "ok" };
    const gate = Promise.withResolvers<void>();
    w.opts.gate = gate.promise; // the rest of the stream waits for the test
    const r = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      body: chat("y".repeat(800), { stream: true }),
    });
    assert.equal(r.status, 200);
    assert.equal(worker.prefillTokens, 0, "the first token arrived");
    assert.equal(worker.inFlight, 1, "the stream goes on");
    gate.resolve();
    await r.text();
    await within(worker.idle(), "the stream ended");
  } finally {
    await g.close();
    await w.close();
  }
});

Deno.test("backlog: a failed attempt gives its tokens back", async () => {
  const bad = new FakeWorker({ mode: { kind: "status", status: 500 } });
  const good = new FakeWorker();
  const g = await startGateway([bad.url, good.url], { policy: "round_robin" });
  try {
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: chat("z".repeat(200)),
      });
      assert.equal(r.status, 200);
      await r.text();
    }
    for (const w of g.gw.registry.all()) {
      assert.equal(w.prefillTokens, 0, w.url);
      assert.equal(w.inFlight, 0, w.url);
    }
  } finally {
    await g.close();
    await Promise.all([bad.close(), good.close()]);
  }
});

Deno.test("prediction: cache_aware's predicted cached share is checked against the worker's usage", async () => {
  const o = parseSimWorkerArgs(["--port", "0", "--time-scale", "0"]);
  const sims = [0, 1].map(() => startSimWorker(o as Exclude<typeof o, "help">));
  const g = await startGateway(sims.map((s) => s.url), { policy: "cache_aware" });
  try {
    const system = "You are a careful assistant who answers briefly. ".repeat(30);
    const body = (q: string, stream: boolean) =>
      JSON.stringify({
        model: "sim-model",
        messages: [{ role: "system", content: system }, { role: "user", content: q }],
        max_tokens: 3,
        stream,
        stream_options: stream ? { include_usage: true } : undefined,
      });
    for (const [q, stream] of [["first?", false], ["second?", true], ["third?", false]] as const) {
      const r = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: body(q, stream),
      });
      assert.equal(r.status, 200);
      await r.text();
    }
    const text = await (await fetch(g.metricsUrl)).text();
    const count = Number(
      /smg_policy_cache_prediction_error_count\{policy="cache_aware"\} (\d+)/.exec(text)?.[1],
    );
    assert.equal(count, 3, "every answered request with a prediction is checked");
    const sum = Number(
      /smg_policy_cache_prediction_error_sum\{policy="cache_aware"\} (\S+)/.exec(text)?.[1],
    );
    assert.ok(Math.abs(sum) < 0.6, `predictions come true within a few blocks: sum ${sum}`);
    const reported = Number(
      /smg_policy_cached_tokens_total\{policy="cache_aware",source="reported"\} (\d+)/.exec(
        text,
      )?.[1],
    );
    assert.ok(reported > 0, "the repeats found the system prompt cached");
    // Each worker keeps the usage it reported (the status page's cached share).
    const workers = g.gw.registry.all();
    assert.equal(workers.reduce((n, w) => n + w.reportedCachedTokens, 0), reported);
    assert.ok(workers.every((w) => w.reportedCachedTokens <= w.reportedPromptTokens));
    assert.ok(workers.reduce((n, w) => n + w.reportedPromptTokens, 0) > reported);
  } finally {
    await g.close();
    await Promise.all(sims.map((s) => s.close()));
  }
});
