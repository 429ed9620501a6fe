/**
 * Worker registry sync between real router processes on loopback: a worker registered on one
 * router is imported by the others, which route to it; the owner's delete removes it
 * everywhere. Waits on the routers' log lines, never on fixed sleeps.
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
  return await spawnGateway(MAIN, [
    ...meshRouterArgs(name, meshPort, seeds),
    ...(workers.length ? ["--worker-urls", ...workers] : []),
  ]);
}

async function stop(p: GatewayProcess): Promise<void> {
  try {
    p.child.kill("SIGTERM");
  } catch { /* gone */ }
  await p.exited;
}

Deno.test("mesh processes: workers registered on one router are imported, routed to, and removed by the owner", async () => {
  const worker = new FakeWorker();
  const [pa, pb, pc] = [freePort(), freePort(), freePort()];
  const a = await router("a", pa, null, [worker.url]);
  const b = await router("b", pb, pa, []);
  const c = await router("c", pc, pb, []);
  try {
    const imported = new RegExp(`msg="imported a worker from the mesh"[^\\n]*worker=${worker.url}`);
    await Promise.all([b.waitForOutput(imported), c.waitForOutput(imported)]);
    const list = await (await fetch(`${c.url}/workers`)).json();
    assert.deepEqual(list.workers.map((w: { url: string }) => w.url), [worker.url]);
    // c routes to a's worker once a's probe made it ready and a published that.
    await c.waitForOutput(
      /msg="(imported a worker from the mesh|imported worker follows its owner's health)"[^\n]*status=ready/,
    );
    const r = await fetch(`${c.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", prompt: "hi" }),
    });
    const status = r.status;
    await r.body?.cancel();
    assert.equal(status, 200, "a request through c reached a's worker");
    // The owner deletes it: gone on b and c.
    const id = (await (await fetch(`${a.url}/workers`)).json()).workers[0].id;
    const del = await fetch(`${a.url}/workers/${id}`, { method: "DELETE" });
    assert.equal(del.status, 202);
    await del.body?.cancel();
    const removed = /msg="removing an imported worker: its owner removed it"/;
    await Promise.all([b.waitForOutput(removed), c.waitForOutput(removed)]);
  } finally {
    for (const p of [c, b, a]) await stop(p);
    await worker.close();
  }
});
