/**
 * Conversations through the real gateway and real (fake) workers: a routing key keeps a
 * conversation on one worker with `manual` and with sticky sessions on top of round_robin, and
 * the conversation moves when its worker dies or goes not ready; with the override, `rid` turns
 * (`conv7_t1`, `conv7_t2`) land together.
 */

import assert from "node:assert/strict";
import type { PolicyName } from "../../lib/config/config.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";

/** Sends one chat turn; returns the URL of the worker that answered. */
async function turn(
  g: TestGateway,
  opts: { key?: string; rid?: string; user?: string } = {},
): Promise<string> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(opts.key ? { "x-smg-routing-key": opts.key } : {}),
    },
    body: JSON.stringify({
      model: "test-model",
      messages: [{ role: "user", content: opts.user ?? "hi" }],
      ...(opts.rid ? { rid: opts.rid } : {}),
    }),
  });
  await res.body?.cancel();
  assert.equal(res.status, 200);
  const id = res.headers.get("x-smg-routed-worker-id")!;
  return g.gw.registry.get(id)!.url;
}

/** Runs `fn` with a gateway for `policy` in front of three fresh workers. */
async function withFleet(
  policy: PolicyName,
  override: boolean,
  fn: (g: TestGateway, kill: (url: string) => Promise<void>) => Promise<void>,
): Promise<void> {
  const ws = [new FakeWorker(), new FakeWorker(), new FakeWorker()];
  const closed = new Set<FakeWorker>();
  const g = await startGateway(ws.map((w) => w.url), {
    policy,
    routingKeyOverride: override,
    // No background probes: a worker goes down only when the test says so or a request fails.
    health: { disabled: true },
  });
  const kill = async (url: string) => {
    const w = ws.find((w) => w.url === url)!;
    closed.add(w);
    await w.close();
  };
  try {
    await fn(g, kill);
  } finally {
    await g.close();
    for (const w of ws) if (!closed.has(w)) await w.close();
  }
}

async function turns(g: TestGateway, n: number, opts: { key?: string; rid?: string }) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await turn(g, opts));
  return out;
}

Deno.test("sticky sessions (gateway): manual keeps a keyed conversation on one worker, moves it when that worker dies", async () => {
  await withFleet("manual", false, async (g, kill) => {
    const home = await turn(g, { key: "conv-a" });
    assert.deepEqual(await turns(g, 8, { key: "conv-a" }), Array(8).fill(home));
    // Other conversations spread over the fleet (manual places new keys at random).
    const others = new Set<string>();
    for (let i = 0; i < 24; i++) others.add(await turn(g, { key: `other-${i}` }));
    assert.equal(others.size, 3);
    // The worker dies (its port closes): the conversation moves to one other worker and stays.
    await kill(home);
    const after = await turns(g, 6, { key: "conv-a" });
    assert.notEqual(after[0], home);
    assert.deepEqual(after, Array(6).fill(after[0]));
  });
});

Deno.test("sticky sessions (gateway): round_robin with --routing-key-override pins a keyed conversation, moves it when its worker goes not ready", async () => {
  await withFleet("round_robin", true, async (g) => {
    const home = await turn(g, { key: "conv-b" });
    assert.deepEqual(await turns(g, 8, { key: "conv-b" }), Array(8).fill(home));
    // Requests without a key still rotate.
    assert.equal(new Set(await turns(g, 6, {})).size, 3);
    g.gw.registry.byUrl(home)!.setStatus("not_ready");
    const after = await turns(g, 6, { key: "conv-b" });
    assert.notEqual(after[0], home);
    assert.deepEqual(after, Array(6).fill(after[0]));
    // The new worker is now the primary: the key stays there when the old one comes back.
    g.gw.registry.byUrl(home)!.setStatus("ready");
    assert.deepEqual(await turns(g, 4, { key: "conv-b" }), Array(4).fill(after[0]));
    const metrics = await (await fetch(g.metricsUrl)).text();
    assert.match(metrics, /smg_manual_policy_branch_total\{branch="occupied_hit"\} [1-9]/);
    assert.match(metrics, /smg_manual_policy_branch_total\{branch="occupied_miss"\} 1\b/);
    assert.match(metrics, /smg_routing_key_source_total\{source="header"\} [1-9]/);
  });
});

Deno.test("sticky sessions (gateway): rid turns of one conversation land together with the override", async () => {
  await withFleet("round_robin", true, async (g) => {
    const homes = new Map<string, string>();
    for (let t = 1; t <= 4; t++) {
      for (const conv of ["conv7", "conv8", "conv9"]) {
        const w = await turn(g, { rid: `${conv}_t${t}` });
        if (t === 1) homes.set(conv, w);
        else assert.equal(w, homes.get(conv), `${conv} turn ${t}`);
      }
    }
    // round_robin placed the three new conversations on three different workers.
    assert.equal(new Set(homes.values()).size, 3);
    // A retry of a turn and a header naming another conversation still follow the rid.
    assert.equal(await turn(g, { rid: "conv7_t4_r1", key: "conv8" }), homes.get("conv7"));
  });
});

Deno.test("sticky sessions (gateway): without the override round_robin ignores keys and rids", async () => {
  await withFleet("round_robin", false, async (g) => {
    assert.equal(new Set(await turns(g, 6, { key: "conv-c", rid: "conv-c_t1" })).size, 3);
  });
});
