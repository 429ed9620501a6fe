/**
 * Characters per token learned per model and worker: the default until answers arrive, a
 * model's pooled answers, a mesh peer's figure while there are none, and, through a gateway, the
 * `prompt_tokens` of real answers turned into what the next request is charged and exported.
 */

import assert from "node:assert/strict";
import { DEFAULT_CHARS_PER_TOKEN, MIN_SAMPLES } from "../../lib/core/chars_per_token.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { TextRatios } from "../../lib/workers/text_ratios.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";
import { workerSetup } from "../support/workers.ts";

Deno.test("text ratios: the default, then the model's answers, a peer's figure meanwhile", () => {
  const { manager } = workerSetup(new FakeClock(0));
  const a = manager.add({ url: "http://a", models: ["m"] });
  const b = manager.add({ url: "http://b", models: ["m"] });
  const r = new TextRatios();
  assert.equal(r.forModel("m"), DEFAULT_CHARS_PER_TOKEN);
  assert.equal(r.forModel(null), DEFAULT_CHARS_PER_TOKEN);
  r.applyPeer("m", 6);
  assert.equal(r.forModel("m"), 6, "a peer's figure before any answer here");
  for (let i = 0; i < MIN_SAMPLES; i++) r.observe("m", i % 2 ? a : b, 8000, 1000);
  assert.equal(r.forModel("m"), 8, "this gateway's own answers win");
  assert.equal(a.charsPerToken, null, "two answers are too few for a worker of its own");
  for (let i = 0; i < MIN_SAMPLES; i++) r.observe("m", a, 16000, 1000);
  assert.equal(a.charsPerToken, 16, "a's own: 4 answers at 16, the 2 at 8 trimmed");
  assert.deepEqual(r.models().map((x) => [x.model, x.source, x.samples]), [["m", "answers", 8]]);
  r.applyPeer("other", 3);
  assert.deepEqual(r.models().map((x) => [x.model, x.charsPerToken, x.source]).at(-1), [
    "other",
    3,
    "peers",
  ]);
  assert.equal(r.observe("m", a, 10, 10), false, "a 10-token prompt is not a sample");
});

Deno.test("text ratios: a gateway learns 8 characters a token from its workers' answers, charges and exports it", async () => {
  // Every answer says 100 prompt tokens; every prompt below is 800 characters.
  const w = new FakeWorker({ usage: { prompt: 100, completion: 2 } });
  const g = await startGateway([w.url], { policy: "least_load" });
  const chat = (content: string) =>
    JSON.stringify({ model: "test-model", messages: [{ role: "user", content }] });
  try {
    const worker = g.gw.registry.byUrl(w.url)!;
    for (let i = 0; i < MIN_SAMPLES; i++) {
      const r = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        body: chat(String(i).repeat(800)),
      });
      assert.equal(r.status, 200);
      await r.text();
    }
    await within(worker.idle(), "the answers are done");
    assert.equal(g.gw.ratios.forModel("test-model"), 8);
    assert.equal(worker.charsPerToken, 8);
    const metrics = await g.gw.renderMetrics();
    assert.match(metrics, /smg_policy_chars_per_token\{model="test-model",source="answers"\} 8/);
    assert.match(metrics, new RegExp(`smg_worker_chars_per_token\\{worker="${w.url}"\\} 8`));

    // The next 800 characters are charged to the backlog as 100 tokens, not 200.
    w.opts.mode = { kind: "hang" };
    const leave = new AbortController();
    const pending = fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      body: chat("z".repeat(800)),
      signal: leave.signal,
    }).catch(() => null);
    await until(() => w.seen.requests === MIN_SAMPLES + 1, (l) => w.subscribe(l), "sent");
    assert.equal(worker.prefillTokens, 100);
    leave.abort();
    await pending;
    await within(worker.idle(), "the client left");
  } finally {
    await g.close();
    await w.close();
  }
});
