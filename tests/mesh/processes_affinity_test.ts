/**
 * Cross-router cache affinity between real router processes on loopback: a conversation's turn
 * routed by `cache_aware` through router A goes to some worker; its next turn, sent to router B,
 * goes to the same worker even though the other worker is then the less busy, because A's
 * decision reached B through the mesh (8 conversations: a chance pass is 1 in 256). Waits on
 * log lines and worker counters, never on sleeps.
 */

import assert from "node:assert/strict";
import { FakeWorker } from "../support/fake_worker.ts";
import {
  type GatewayProcess,
  meshRouterArgs,
  spawnGateway,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

async function router(name: string, meshPort: number, seed: number | null, workers: string[]) {
  const seeds = seed === null ? [] : [`127.0.0.1:${seed}`];
  const args = meshRouterArgs(name, meshPort, seeds).map((a) =>
    a === "round_robin" ? "cache_aware" : a
  );
  return await spawnGateway(MAIN, [...args, "--worker-urls", ...workers]);
}

async function stop(p: GatewayProcess): Promise<void> {
  try {
    p.child.kill("SIGTERM");
  } catch { /* gone */ }
  await p.exited;
}

async function chat(router: GatewayProcess, text: string): Promise<number> {
  const r = await fetch(`${router.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: text }] }),
  });
  await r.body?.cancel();
  return r.status;
}

Deno.test("mesh processes: turn k through router A and turn k+1 through router B reach the same worker", async () => {
  const w1 = new FakeWorker();
  const w2 = new FakeWorker();
  const urls = [w1.url, w2.url];
  const [pa, pb] = [freePort(), freePort()];
  const ready = (p: GatewayProcess) =>
    Promise.all(
      urls.map((u) => p.waitForOutput(new RegExp(`msg="worker ready"[^\n]*worker=${u}`))),
    );
  const a = await router("a", pa, null, urls);
  let b: GatewayProcess | null = null;
  try {
    await ready(a);
    const conversations = Array.from(
      { length: 8 },
      (_, i) => `system: you are the helpdesk of tenant ${i}. `.repeat(4) + `user: case ${i}`,
    );
    const servedBy: string[] = [];
    for (const text of conversations) {
      const before = w1.seen.requests;
      assert.equal(await chat(a, text), 200);
      servedBy.push(w1.seen.requests > before ? w1.url : w2.url);
    }
    assert.equal(new Set(servedBy).size, 2, "A spread the conversations over both workers");
    // B joins later: A names its tree on the new stream and B copies it.
    b = await router("b", pb, pa, urls);
    await Promise.all([b.waitForOutput(/msg="cache tree repaired from a peer"/), ready(b)]);
    for (const [i, text] of conversations.entries()) {
      const before = w1.seen.requests;
      assert.equal(await chat(b, text + " assistant: noted. user: and the next step?"), 200);
      assert.equal(w1.seen.requests > before ? w1.url : w2.url, servedBy[i], `conversation ${i}`);
    }
  } finally {
    if (b) await stop(b);
    await stop(a);
    await w1.close();
    await w2.close();
  }
});
