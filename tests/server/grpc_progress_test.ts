/**
 * Progress deadlines on gRPC workers, in fake time, over simulated sglang schedulers that go
 * silent (`stallAfter`): a whole answer never sent is retried elsewhere after the head deadline
 * plus its budget; a stream silent past `--stream-idle-timeout-secs` ends with
 * `upstream_stream_stalled`; the worker is left out until it shows progress.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { SglangClient } from "../../lib/grpc/sglang_client.ts";
import type { SimGrpcOptions } from "../../lib/sim/grpc_server.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { type GrpcSim, grpcSim } from "../support/grpc_sim.ts";

/** A simulated scheduler and the `Generate` calls it received. */
interface Sim extends GrpcSim {
  seen: number;
}

async function sim(o: Partial<SimGrpcOptions> = {}): Promise<Sim> {
  const s: Sim = Object.assign(await grpcSim(o), { seen: 0 });
  s.server.onGenerate = () => s.seen++;
  return s;
}

/** A gateway on fake time over `sims`, the first alone routable until its call is there. */
async function withFleet(sims: Sim[], fn: (g: TestGateway, clock: FakeClock) => Promise<void>) {
  const clock = new FakeClock();
  const g = await startGateway(sims.map((s) => s.url), {
    modelPath: "qwen3",
    requestTimeoutSecs: 600,
    streamHeadTimeoutSecs: 1,
    streamIdleTimeoutSecs: 2,
  }, { clock, grpc: { tokenizer: qwen3(), client: (url) => new SglangClient(url) } });
  try {
    for (const w of g.gw.registry.all().filter((w) => w.url !== sims[0].url)) {
      w.setStatus("not_ready");
    }
    await fn(g, clock);
  } finally {
    await g.close();
    for (const s of sims) await s.close();
  }
}

/** Advances fake time 100 ms a step, letting the gateway run, until `p` settles. */
async function pump<T>(clock: FakeClock, p: Promise<T>): Promise<{ value: T; tookMs: number }> {
  let settled = false;
  const done = p.finally(() => settled = true);
  const start = clock.now();
  for (let i = 0; !settled && i < 600; i++) {
    await new Promise((r) => setTimeout(r, 1));
    if (!settled) clock.advance(100);
  }
  return { value: await done, tookMs: clock.now() - start };
}

const post = (g: TestGateway, body: unknown) =>
  fetch(g.url + "/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "qwen3-sim",
      messages: [{ role: "user", content: "hello there" }],
      ...body as object,
    }),
  });

async function atWorker(s: Sim): Promise<void> {
  for (let i = 0; s.seen === 0 && i < 1000; i++) await new Promise((r) => setTimeout(r, 1));
  assert.equal(s.seen, 1, "the call reached the worker");
}

Deno.test("grpc progress: a whole answer never sent is retried elsewhere after the head deadline plus its budget", async () => {
  const mute = await sim({ stallAfter: 0 });
  const fine = await sim();
  await withFleet([mute, fine], async (g, clock) => {
    const answer = post(g, { max_tokens: 4 }); // 1 s + 4 × 0.25 s
    await atWorker(mute);
    for (const w of g.gw.registry.all()) w.setStatus("ready");
    const { value: r, tookMs } = await pump(clock, answer);
    assert.equal(r.status, 200);
    assert.ok((await r.json()).choices[0].message.content.length > 0);
    assert.ok(tookMs >= 2000 && tookMs <= 3000, `given up on after ${tookMs} ms`);
    assert.equal(fine.seen, 1);
    const silent = g.gw.registry.all().find((w) => w.url === mute.url)!;
    assert.equal(silent.available(clock.now()), false, "left out until it shows progress");
  });
});

Deno.test("grpc progress: a stream silent mid-way ends with upstream_stream_stalled within its idle deadline plus 1 s", async () => {
  const staller = await sim({ stallAfter: 3, maxNewTokens: 40 });
  await withFleet([staller], async (g, clock) => {
    const r = await post(g, { stream: true, max_tokens: 40 });
    assert.equal(r.status, 200);
    const { value: text, tookMs } = await pump(clock, r.text());
    assert.ok(tookMs >= 2000 && tookMs <= 3100, `ended ${tookMs} ms after its last piece`);
    assert.match(text, /event: error\ndata: .*"code":"upstream_stream_stalled"/);
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, /smg_worker_progress_deadline_misses_total\{[^}]*phase="idle"\} 1/);
  });
});

Deno.test("grpc continuation: a stream silent mid-way goes on on another worker from the ids generated so far, as one stream", async () => {
  const staller = await sim({ stallAfter: 3, maxNewTokens: 40 });
  const fine = await sim({ maxNewTokens: 40 });
  const asked: { ids: number[]; max?: number }[] = [];
  for (const s of [staller, fine]) {
    s.server.onGenerate = (r) => {
      s.seen++;
      asked.push({ ids: r.tokenized?.input_ids ?? [], max: r.sampling_params?.max_new_tokens });
    };
  }
  await withFleet([staller, fine], async (g, clock) => {
    const r = await post(g, {
      stream: true,
      max_tokens: 12,
      stream_options: { include_usage: true },
    });
    assert.equal(r.status, 200);
    for (const w of g.gw.registry.all()) w.setStatus("ready");
    const { value: raw } = await pump(clock, r.text());
    assert.doesNotMatch(raw, /event: error/);
    assert.match(raw, /data: \[DONE\]/);
    const events = raw.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) =>
      JSON.parse(e.slice(6))
    );
    assert.equal(new Set(events.map((e) => e.id)).size, 1, "one stream id");
    const roles = events.filter((e) => e.choices?.[0]?.delta?.role).length;
    assert.equal(roles, 1, "the role once");
    assert.equal(asked.length, 2, "asked twice: the first worker, then the rest elsewhere");
    const [first, rest] = asked;
    const sent = rest.ids.length - first.ids.length; // the ids streamed before the silence
    assert.ok(sent > 0 && sent <= 3, `the prompt's ids and the ${sent} generated`);
    assert.deepEqual(rest.ids.slice(0, first.ids.length), first.ids);
    assert.equal(rest.max, 12 - sent, "the budget less what was generated");
    const usage = events.find((e) => e.usage)?.usage;
    assert.equal(usage.prompt_tokens, first.ids.length, "the original prompt");
    assert.equal(usage.completion_tokens, 12, "every generated token");
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, /smg_stream_continuations_total\{[^}]*result="continued"\} 1/);
  });
});
