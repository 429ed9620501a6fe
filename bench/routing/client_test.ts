/**
 * The drive loop against a stub SSE server on 127.0.0.1: a trace replay's warm-up by count and
 * measured window, the hook at the window's opening, what each request carries, and a request
 * still running at the drain timeout aborted and counted as cut.
 */

import assert from "node:assert/strict";
import { drive } from "./client.ts";
import { replayOffer, replayPlan } from "./replay.ts";
import type { TraceRequest } from "./trace.ts";
import { BlockTexts, tracePrompt } from "./trace_prompts.ts";

interface Seen {
  content: string;
  maxTokens: number;
  key: string | null;
}

/** A server streaming one content chunk, a usage chunk and `[DONE]`; `hang` never ends. */
function stub(hang: (maxTokens: number) => boolean = () => false) {
  const seen: Seen[] = [];
  const enc = new TextEncoder();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const body = await req.json();
    seen.push({
      content: body.messages[0].content,
      maxTokens: body.max_tokens,
      key: req.headers.get("x-smg-routing-key"),
    });
    const events = [
      { choices: [{ delta: { content: "hi" } }] },
      { choices: [], usage: { prompt_tokens: 10, completion_tokens: 1 } },
    ].map((e) => `data: ${JSON.stringify(e)}\n\n`).join("") + "data: [DONE]\n\n";
    const stream = hang(body.max_tokens)
      ? new ReadableStream({
        start: (c) => c.enqueue(enc.encode(events.split("\n\n")[0] + "\n\n")),
      })
      : new ReadableStream({
        start: (c) => {
          c.enqueue(enc.encode(events));
          c.close();
        },
      });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  });
  return { seen, server, url: `http://127.0.0.1:${server.addr.port}` };
}

const req = (timestampMs: number, outputLength: number): TraceRequest => ({
  timestampMs,
  inputLength: 700,
  outputLength,
  hashIds: [7, timestampMs],
});

Deno.test("drive: a trace replay measures after its warm-up count, hook at the opening", async () => {
  const s = stub();
  try {
    const trace = [0, 5, 10, 15, 20, 25].map((t, i) => req(t, i + 1));
    const plan = replayPlan(trace, { speed: 1, warmup: 2, durationS: 60, maxRequests: null });
    let hooks = 0;
    const d = await drive(
      s.url,
      replayOffer(trace, plan, new BlockTexts(0), (i) => ({ "x-smg-routing-key": `k${i}` })),
      {
        warmupMs: plan.warmupMs,
        durationMs: plan.durationMs,
        maxRequests: null,
        drainMs: 5000,
        model: "m",
        onMeasureStart: () => {
          hooks++;
          return Promise.resolve();
        },
      },
    );
    assert.equal(hooks, 1);
    assert.equal(d.cut, 0);
    const bySession = new Map(d.records.map((r) => [r.session, r]));
    assert.deepEqual([...bySession.keys()].sort(), ["r0", "r1", "r2", "r3", "r4", "r5"]);
    assert.deepEqual(
      ["r0", "r1", "r2", "r3", "r4", "r5"].map((k) => bySession.get(k)!.measured),
      [false, false, true, true, true, true],
    );
    assert.ok(d.records.every((r) => r.ok && r.ttftMs !== null && r.tenant === null));
    const sent = [...s.seen].sort((a, b) => a.maxTokens - b.maxTokens);
    assert.deepEqual(sent.map((x) => x.key), ["k0", "k1", "k2", "k3", "k4", "k5"]);
    assert.equal(sent[4].content, tracePrompt(new BlockTexts(0), trace[4]));
  } finally {
    await s.server.shutdown();
  }
});

Deno.test("drive: a request still running at the drain timeout is aborted and counted cut", async () => {
  const s = stub((maxTokens) => maxTokens === 2);
  try {
    const trace = [req(0, 1), req(1, 2)];
    const plan = replayPlan(trace, { speed: 1, warmup: 0, durationS: 60, maxRequests: null });
    const d = await drive(s.url, replayOffer(trace, plan, new BlockTexts(0)), {
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
      maxRequests: null,
      drainMs: 50,
      model: "m",
    });
    assert.equal(d.cut, 1);
    const hung = d.records.find((r) => r.session === "r1")!;
    assert.equal(hung.ok, false);
    assert.match(hung.error ?? "", /aborted/);
    assert.equal(d.records.find((r) => r.session === "r0")!.ok, true);
  } finally {
    await s.server.shutdown();
  }
});
