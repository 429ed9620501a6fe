/**
 * The bundled single file (`deno task bundle`) runs from an empty directory: nothing is read
 * from the source tree at run time (the mesh's proto is embedded, grpc-js is bundled). It serves
 * a chat request, its mesh and its status page, and exits 0 on SIGTERM; with static workers it
 * narrows its own net grant to them (the launcher's worker thread loads from the one file).
 */

import assert from "node:assert/strict";
import { FakeWorker } from "./support/fake_worker.ts";
import { gatewayListenArgs, spawnGateway } from "../support/gateway_process.ts";
import { freePort } from "../lib/core/free_port.ts";

Deno.test("bundle: the single file serves from an empty directory and drains on SIGTERM", async () => {
  const out = await Deno.makeTempDir({ prefix: "smg-bundle-" });
  const empty = await Deno.makeTempDir({ prefix: "smg-empty-" });
  const worker = new FakeWorker();
  try {
    const root = new URL("..", import.meta.url).pathname;
    // `deno bundle` takes ~5 s here; once in many runs it hung with no CPU (waiting in epoll):
    // killed after 90 s, it gets one more try, so that a hang costs minutes, not CI's whole budget.
    const build = () =>
      new Deno.Command(Deno.execPath(), {
        args: ["bundle", "--platform", "deno", "-o", `${out}/smg.js`, `${root}main.ts`],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(90_000),
      }).output();
    let bundle = await build();
    if (bundle.signal === "SIGTERM") bundle = await build();
    assert.equal(bundle.code, 0, new TextDecoder().decode(bundle.stderr));

    const meshPort = freePort();
    const gw = await spawnGateway(`${out}/smg.js`, [
      ...gatewayListenArgs(),
      "--worker-urls",
      worker.url,
      "--policy",
      "round_robin",
      "--shutdown-grace-period-secs",
      "1",
      "--enable-mesh",
      "--mesh-server-name",
      "solo",
      "--mesh-host",
      "127.0.0.1",
      "--mesh-port",
      String(meshPort),
    ], empty);
    await gw.waitForOutput(/msg="mesh listening"/);
    const mesh = await (await fetch(`${gw.url}/mesh/status`)).json();
    assert.deepEqual(
      mesh.members.map((m: { name: string; status: string }) => [m.name, m.status]),
      [
        ["solo", "ALIVE"],
      ],
    );
    // The worker is probed at start; its activation is logged.
    await gw.waitForOutput(/msg="worker ready"/);
    const ready = await fetch(`${gw.url}/readiness`);
    await ready.body?.cancel();
    assert.equal(ready.status, 200);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    assert.match((await res.json()).choices[0].message.content, /hello/);
    // The status page is in the one file too, and its snapshot sees the worker.
    const page = await fetch(`${gw.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>smg status<\/title>/);
    const snap = await (await fetch(`${gw.url}/dashboard/snapshot`)).json();
    assert.deepEqual(snap.workers.map((w: { url: string }) => w.url), [worker.url]);

    gw.child.kill("SIGTERM");
    assert.equal(await gw.exited, 0, gw.stderr());
    assert.match(gw.stderr(), /shutdown complete/);

    // Without the mesh its workers are static: the bundle narrows its own net grant to them.
    const narrow = await spawnGateway(`${out}/smg.js`, [
      ...gatewayListenArgs(),
      "--worker-urls",
      worker.url,
      "--shutdown-grace-period-secs",
      "0",
    ], empty);
    assert.match(
      narrow.stderr(),
      new RegExp(
        `net_grant="narrow: 127\\.0\\.0\\.1:0,127\\.0\\.0\\.1:${new URL(worker.url).port}"`,
      ),
    );
    narrow.child.kill("SIGTERM");
    assert.equal(await narrow.exited, 0, narrow.stderr());
  } finally {
    await worker.close();
    await Deno.remove(out, { recursive: true });
    await Deno.remove(empty, { recursive: true });
  }
});
