/**
 * Streams continued on another worker after their worker broke mid-way, over real loopback HTTP
 * and simulated engines (greedy: each token a function of those before it): the client's stream,
 * text compared byte for byte against an unbroken one, one id, one role, one usage counting the
 * original prompt and every token; and the streams that end with an error event instead.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { DEFAULT_ENGINE } from "../../lib/sim/cli.ts";
import { type SimWorker, startSimWorker } from "../../lib/sim/worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { until } from "../../support/wait.ts";
import { type Fault, FaultFront } from "../support/fault_front.ts";
import { NO_FAULTS } from "../../support/sim_engine.ts";

const MODEL = "sim-model";

function sim(): SimWorker {
  return startSimWorker({
    host: "127.0.0.1",
    port: 0,
    engine: { ...DEFAULT_ENGINE, timeScale: 0 },
    server: {
      model: MODEL,
      maxNewTokens: 64,
      ...NO_FAULTS,
    },
    seed: 1,
    bootstrapPort: 0,
  });
}

/** A stream's events read back: its content, ids, roles, usage and how it ended. */
interface Read {
  text: string;
  ids: Set<string>;
  roles: number;
  usage: Record<string, number> | null;
  done: boolean;
  errors: string[];
}

type Api = "chat" | "completions" | "generate";

function readStream(raw: string, endpoint: Api): Read {
  const r: Read = { text: "", ids: new Set(), roles: 0, usage: null, done: false, errors: [] };
  for (const event of raw.split("\n\n")) {
    if (event.startsWith("event: error")) r.errors.push(event);
    const data = event.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
    if (!data || event.startsWith("event: error")) continue;
    if (data === "[DONE]") {
      r.done = true;
      continue;
    }
    const o = JSON.parse(data);
    if (endpoint === "generate") {
      r.text = o.text; // sglang's /generate streams the whole text so far
      r.ids.add(o.meta_info.id);
      if (o.meta_info.finish_reason) {
        const { prompt_tokens, completion_tokens } = o.meta_info;
        r.usage = { prompt_tokens, completion_tokens };
      }
      continue;
    }
    r.ids.add(o.id);
    if (o.usage) r.usage = o.usage;
    for (const c of o.choices ?? []) {
      if (endpoint === "chat") {
        if (c.delta?.role) r.roles++;
        r.text += c.delta?.content ?? "";
      } else r.text += c.text ?? "";
    }
  }
  return r;
}

const bodies = {
  chat: (extra: Record<string, unknown> = {}) => ({
    model: MODEL,
    messages: [{ role: "user", content: "Tell me about the fox and the crow, at length." }],
    max_tokens: 40,
    stream: true,
    stream_options: { include_usage: true },
    ...extra,
  }),
  completions: (extra: Record<string, unknown> = {}) => ({
    model: MODEL,
    // Ends at a token boundary the generated text cannot merge with (a newline): the continued
    // prompt, this plus the text so far, then tokenizes as the unbroken context did.
    prompt: "Once upon a time, a fox.\n",
    max_tokens: 40,
    stream: true,
    stream_options: { include_usage: true },
    ...extra,
  }),

  generate: (extra: Record<string, unknown> = {}) => ({
    text: "Once upon a time, a fox.\n",
    sampling_params: { max_new_tokens: 40 },
    stream: true,
    ...extra,
  }),
};

const PATHS = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  generate: "/generate",
};

async function post(base: string, endpoint: Api, body: unknown) {
  const r = await fetch(base + PATHS[endpoint], {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  return r;
}

/**
 * A gateway over a worker that breaks its streams (`fault`) and `others` plain ones, the broken
 * one alone routable until the request is at it; runs `fn`, then closes everything.
 */
async function withBreakingFleet(
  fault: Fault,
  fn: (g: TestGateway, front: FaultFront, clock: FakeClock) => Promise<void>,
  o: { others?: number; secondFault?: Fault; limit?: number } = {},
) {
  const sims = [sim(), ...Array.from({ length: o.others ?? 1 }, sim)];
  const front = new FaultFront(sims[0].url, fault);
  const second = o.secondFault ? new FaultFront(sims[1].url, o.secondFault) : null;
  const urls = [front.url, second?.url ?? sims[1].url, ...sims.slice(2).map((s) => s.url)];
  const clock = new FakeClock();
  const g = await startGateway(urls, {
    policy: "round_robin",
    streamIdleTimeoutSecs: 2,
    streamMigrationLimit: o.limit ?? 3,
  }, { clock });
  try {
    const rest = g.gw.registry.all().filter((w) => w.url !== front.url);
    for (const w of rest) w.setStatus("not_ready");
    const opened = until(() => front.seen.requests > 0, (l) => front.subscribe(l), "the stream")
      .then(() => rest.forEach((w) => w.setStatus("ready")));
    await fn(g, front, clock);
    await opened;
  } finally {
    await g.close();
    await Promise.all([front.close(), second?.close(), ...sims.map((s) => s.close())]);
  }
}

async function metric(g: TestGateway, re: RegExp): Promise<string | null> {
  return (await (await fetch(g.metricsUrl)).text()).match(re)?.[0] ?? null;
}

for (const endpoint of ["chat", "completions", "generate"] as const) {
  for (const kind of ["die", "truncate"] as const) {
    Deno.test(
      `continuation: a ${endpoint} stream whose worker ${
        kind === "die" ? "dies" : "ends it without [DONE]"
      } goes on elsewhere, byte for byte as an unbroken one`,
      async () => {
        await withBreakingFleet({ kind, afterEvents: 7 }, async (g, front) => {
          const unbroken = sim();
          let want: Read;
          try {
            want = readStream(
              await (await post(unbroken.url, endpoint, bodies[endpoint]())).text(),
              endpoint,
            );
          } finally {
            await unbroken.close();
          }
          const got = readStream(
            await (await post(g.url, endpoint, bodies[endpoint]())).text(),
            endpoint,
          );
          assert.equal(front.seen.faulted, 1, "the first worker broke the stream");
          assert.deepEqual(got.errors, []);
          assert.equal(got.text, want.text, "the same text as the unbroken stream");
          assert.equal(got.ids.size, 1, "one stream id");
          if (endpoint === "chat") assert.equal(got.roles, 1, "the role once");
          assert.equal(got.done, true);
          assert.deepEqual(got.usage, want.usage, "the original prompt and every generated token");
          assert.ok(await metric(g, /smg_stream_continuations_total\{[^}]*result="continued"\} 1/));
        });
      },
    );
  }
}

Deno.test("continuation: a stream silent past its idle deadline goes on elsewhere, byte for byte", async () => {
  await withBreakingFleet({ kind: "stall", afterEvents: 5 }, async (g, front, clock) => {
    const unbroken = sim();
    const want = readStream(await (await post(unbroken.url, "chat", bodies.chat())).text(), "chat");
    await unbroken.close();
    const r = await post(g.url, "chat", bodies.chat());
    const text = r.text();
    await until(() => front.seen.faulted > 0, (l) => front.subscribe(l), "the stall");
    // The idle deadline (2 s) on fake time, until the stalled stream is given up on.
    while (front.seen.cancelled === 0) {
      clock.advance(250);
      await new Promise((res) => setTimeout(res, 1));
    }
    const got = readStream(await text, "chat");
    assert.deepEqual(got.errors, []);
    assert.equal(got.text, want.text);
    assert.equal(got.ids.size, 1);
    assert.deepEqual(got.usage, want.usage);
    assert.ok(await metric(g, /smg_worker_progress_deadline_misses_total\{[^}]*phase="idle"\} 1/));
  });
});

Deno.test("continuation: a stream with tools ends with an error event, as it broke", async () => {
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
  await withBreakingFleet({ kind: "die", afterEvents: 4 }, async (g) => {
    const got = readStream(
      await (await post(g.url, "chat", bodies.chat({ tools }))).text(),
      "chat",
    );
    assert.equal(got.errors.length, 1);
    assert.match(got.errors[0], /upstream_stream_error/);
    assert.ok(await metric(g, /smg_stream_continuations_total\{[^}]*result="blocked"\} 1/));
  });
});

Deno.test("continuation: when the continuing worker breaks too and none is left, the client gets one error event after the text so far", async () => {
  await withBreakingFleet({ kind: "die", afterEvents: 4 }, async (g, front) => {
    const got = readStream(await (await post(g.url, "chat", bodies.chat())).text(), "chat");
    assert.equal(front.seen.faulted, 1);
    assert.equal(got.errors.length, 1, "one error event");
    assert.ok(got.text.length > 0);
    assert.ok(await metric(g, /smg_stream_continuations_total\{[^}]*result="continued"\} 1/));
    assert.ok(await metric(g, /smg_stream_continuations_total\{[^}]*result="failed"\} 1/));
  }, { secondFault: { kind: "die", afterEvents: 3 } });
});

Deno.test("continuation: --stream-migration-limit 0 ends a broken stream with an error event", async () => {
  await withBreakingFleet({ kind: "die", afterEvents: 4 }, async (g) => {
    const got = readStream(await (await post(g.url, "chat", bodies.chat())).text(), "chat");
    assert.equal(got.errors.length, 1);
    assert.ok(await metric(g, /smg_stream_continuations_total\{[^}]*result="off"\} 1/));
  }, { limit: 0 });
});

Deno.test("continuation: a stream broken after its budget was spent ends cleanly with a length finish", async () => {
  await withBreakingFleet({ kind: "die", afterEvents: 6 }, async (g, front) => {
    // 5 content events, then the finish event is cut: nothing is left to generate.
    const got = readStream(
      await (await post(g.url, "completions", bodies.completions({ max_tokens: 5 }))).text(),
      "completions",
    );
    assert.equal(front.seen.faulted, 1);
    assert.deepEqual(got.errors, []);
    assert.equal(got.done, true);
  });
});
