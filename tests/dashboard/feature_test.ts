/**
 * The status page on a running gateway: both ports serve the page; the metrics port serves the
 * snapshot as openly as `/metrics`, the main port behind the control-plane keys (a `user` key
 * reads it; the client key does not); the snapshot shows the workers and moves with the traffic
 * sent through the gateway; with the mesh on, it shows the members, the open sync stream and the
 * replication lag of a worker's registration; other paths and methods on the metrics port stay
 * 404.
 */

import assert from "node:assert/strict";
import { type ControlPlaneKey, defaultConfig, type MeshConfig } from "../../lib/config/config.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway } from "../../support/gateway.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { within } from "../../support/wait.ts";

const READER: ControlPlaneKey = { id: "dash", name: "Dashboard", role: "user", key: "read-key" };
const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

interface Snap {
  workers: { url: string; status: string; requests_total: number }[];
  routing: { seq: number; samples: { requests_per_sec: number }[] };
}

Deno.test("dashboard: the page on both ports; the snapshot open on the metrics port, keyed on the main one", async () => {
  const workers = [new FakeWorker(), new FakeWorker()];
  const g = await startGateway(workers.map((w) => w.url), {
    apiKey: "client-key",
    controlPlaneApiKeys: [READER],
  });
  const metrics = new URL(g.metricsUrl).origin;
  try {
    for (const base of [metrics, g.url]) {
      const page = await fetch(`${base}/dashboard`);
      assert.equal(page.status, 200, base);
      assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'none'/);
      assert.match(await page.text(), /<title>smg status<\/title>/);
    }
    const open = await fetch(`${metrics}/dashboard/snapshot`);
    assert.equal(open.status, 200);
    const snap: Snap = await open.json();
    assert.deepEqual(snap.workers.map((w) => [w.url, w.status]), [
      [workers[0].url, "ready"],
      [workers[1].url, "ready"],
    ]);

    const none = await fetch(`${g.url}/dashboard/snapshot`);
    assert.equal(none.status, 401);
    assert.equal(none.headers.get("www-authenticate"), 'Bearer realm="control-plane"');
    await none.body?.cancel();
    const client = await fetch(`${g.url}/dashboard/snapshot`, { headers: bearer("client-key") });
    assert.equal(client.status, 401, "the client key does not open the control plane");
    await client.body?.cancel();
    const keyed = await fetch(`${g.url}/dashboard/snapshot`, { headers: bearer("read-key") });
    assert.equal(keyed.status, 200);
    assert.equal((await keyed.json()).workers.length, 2);
  } finally {
    await g.close();
    await Promise.all(workers.map((w) => w.close()));
  }
});

Deno.test("dashboard: the snapshot's counts and routing samples move with requests through the gateway", async () => {
  const workers = [new FakeWorker(), new FakeWorker()];
  const g = await startGateway(workers.map((w) => w.url));
  const snapshot = async (since = 0): Promise<Snap> =>
    await (await fetch(`${g.url}/dashboard/snapshot?since=${since}`)).json();
  try {
    const before = await snapshot();
    assert.deepEqual(before.workers.map((w) => w.requests_total), [0, 0]);
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(chat),
      });
      assert.equal(r.status, 200);
      await r.body?.cancel();
    }
    g.gw.dashboard.history.sample(); // the sampler's next tick, now rather than within a second
    const after = await snapshot(before.routing.seq);
    assert.deepEqual(after.workers.map((w) => w.requests_total), [2, 2]);
    assert.ok(after.routing.seq > before.routing.seq);
    assert.ok(
      after.routing.samples.some((s) => s.requests_per_sec > 0),
      JSON.stringify(after.routing.samples),
    );
  } finally {
    await g.close();
    await Promise.all(workers.map((w) => w.close()));
  }
});

Deno.test("dashboard: the metrics port answers 404 to other paths and methods", async () => {
  const g = await startGateway([]);
  const metrics = new URL(g.metricsUrl).origin;
  try {
    for (
      const [method, path] of [["GET", "/dashboard/"], ["POST", "/dashboard"], ["GET", "/x"]]
    ) {
      const r = await fetch(`${metrics}${path}`, { method });
      assert.equal(r.status, 404, `${method} ${path}`);
      await r.body?.cancel();
    }
    const m = await fetch(g.metricsUrl);
    assert.match(await m.text(), /smg_http_connections_active/);
  } finally {
    await g.close();
  }
});

function meshOn(name: string, port: number, peerUrls: string[] = []): MeshConfig {
  const host = "127.0.0.1";
  return {
    ...defaultConfig().mesh,
    enabled: true,
    serverName: name,
    host,
    advertiseHost: host,
    port,
    peerUrls,
  };
}

Deno.test("dashboard: with the mesh on, the members, the sync stream and the replication lag", async () => {
  const workers = [new FakeWorker(), new FakeWorker()];
  const pa = freePort();
  const a = await startGateway([workers[0].url], { mesh: meshOn("a", pa) });
  const b = await startGateway([], { mesh: meshOn("b", freePort(), [`127.0.0.1:${pa}`]) });
  try {
    const streams = a.gw.mesh!.node.streams;
    await within(
      new Promise<void>((resolve) => {
        if (streams.isOpen("b")) resolve();
        streams.onPeer((peer, open) => peer === "b" && open && resolve());
      }),
      "a's sync stream to b",
    );
    // A worker registered now is a write b acks: a's replication lag. (a's store sync hears
    // each envelope before this listener, registered after it.)
    const lag = a.gw.mesh!.metrics.storeAckLag;
    const acked = new Promise<void>((resolve) =>
      streams.onEnvelope(() => [...lag.entries()].some(({ s }) => s.count > 0) && resolve())
    );
    a.gw.manager.add({ url: workers[1].url });
    await within(acked, "b's ack of a's write");
    a.gw.dashboard.history.sample();
    const snap = await (await fetch(`${new URL(a.metricsUrl).origin}/dashboard/snapshot`)).json();
    assert.equal(snap.mesh.name, "a");
    assert.equal(snap.mesh.streams_open, 1);
    assert.deepEqual(
      snap.mesh.members.map((m: { name: string; self: boolean; stream_open: boolean | null }) => [
        m.name,
        m.self,
        m.stream_open,
      ]),
      [["a", true, null], ["b", false, true]],
    );
    assert.ok(snap.mesh.store.workers.live >= 1, JSON.stringify(snap.mesh.store));
    const lags = snap.routing.samples.map((s: { mesh_lag_p99_ms: number | null }) =>
      s.mesh_lag_p99_ms
    );
    assert.ok(lags.some((l: number | null) => l !== null && l > 0), JSON.stringify(lags));
    const other = await (await fetch(`${new URL(b.metricsUrl).origin}/dashboard/snapshot`)).json();
    assert.equal(other.mesh.name, "b");
  } finally {
    await b.close();
    await a.close();
    await Promise.all(workers.map((w) => w.close()));
  }
});
