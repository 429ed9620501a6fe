/**
 * The mesh inside real in-process gateways: `/mesh/status` with and without the mesh, a mesh
 * port that cannot be bound (the router stops with a clear error), and mTLS (routers with certificates
 * of the mesh CA join; one without cannot).
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import type { MemberStatus } from "../../lib/mesh/member.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";
import { makeCerts } from "../mesh/transport/grpc_support.ts";
import type { MeshConfig } from "../../lib/config/config.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import { GrpcTransport } from "../../lib/mesh/transport/grpc.ts";
import type { PingMessage } from "../../lib/mesh/wire.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { ConfigError } from "../../lib/core/errors.ts";

function meshOn(name: string, port: number, o: Partial<MeshConfig> = {}): MeshConfig {
  return {
    ...defaultConfig().mesh,
    enabled: true,
    serverName: name,
    host: "127.0.0.1",
    advertiseHost: "127.0.0.1",
    port,
    ...o,
  };
}

/** Resolves once `gw`'s mesh holds `peer` in `status` (an event, not a poll). */
function sees(t: TestGateway, peer: string, status: MemberStatus): Promise<void> {
  const node = t.gw.mesh!.node;
  if (node.statusOf(peer) === status) return Promise.resolve();
  return new Promise((resolve) => {
    node.onMember((m) => {
      if (m.name === peer && m.status === status) resolve();
    });
  });
}

async function metric(t: TestGateway, line: RegExp): Promise<string | null> {
  const text = await (await fetch(t.metricsUrl)).text();
  return line.exec(text)?.[1] ?? null;
}

Deno.test("mesh: /mesh/status is 404 mesh_disabled without --enable-mesh", async () => {
  const t = await startGateway([]);
  try {
    const res = await fetch(`${t.url}/mesh/status`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.code, "mesh_disabled");
  } finally {
    await t.close();
  }
});

Deno.test("mesh: a mesh port in use stops the router with a clear error, its ports closed", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  const [main, metrics] = [freePort(), freePort()];
  try {
    await assert.rejects(
      startGateway([], { mesh: meshOn("a", port), port: main, prometheusPort: metrics }),
      (e: Error) =>
        e instanceof ConfigError &&
        /^--enable-mesh: mesh server failed on 127\.0\.0\.1:\d+: .*does not serve without its mesh$/
          .test(e.message),
    );
    // Nothing is left listening: a supervisor restarts it, a load balancer sends it nothing.
    for (const p of [main, metrics]) {
      await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port: p }));
    }
  } finally {
    taken.close();
  }
});

Deno.test("mesh: routers with certificates of the mesh CA form a mesh over mTLS", async () => {
  const certs = await makeCerts();
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "smg-mesh-tls-" });
  const files = async (who: "a" | "b") => {
    await Deno.writeTextFile(`${dir}/${who}.crt`, certs[who].cert);
    await Deno.writeTextFile(`${dir}/${who}.key`, certs[who].key);
    return {
      tlsCaCert: `${dir}/ca.crt`,
      tlsCert: `${dir}/${who}.crt`,
      tlsKey: `${dir}/${who}.key`,
    };
  };
  await Deno.writeTextFile(`${dir}/ca.crt`, certs.ca);
  const pa = freePort();
  const a = await startGateway([], { mesh: meshOn("a", pa, await files("a")) });
  const b = await startGateway([], {
    mesh: meshOn("b", freePort(), { ...await files("b"), peerUrls: [`127.0.0.1:${pa}`] }),
  });
  try {
    await Promise.all([sees(a, "b", "ALIVE"), sees(b, "a", "ALIVE")]);
    const view = await (await fetch(`${a.url}/mesh/status`)).json();
    assert.deepEqual(view.members.map((m: { name: string }) => m.name), ["a", "b"]);
    // The router's pair is read again as the main port's is (SIGHUP calls this): a key that is
    // not the certificate's is refused and the pair in use kept; another CA-signed pair is taken.
    assert.equal(await a.gw.mesh!.reload!("test"), "unchanged");
    await Deno.writeTextFile(`${dir}/a.key`, certs.b.key);
    assert.equal(await a.gw.mesh!.reload!("test"), "failed");
    await Deno.writeTextFile(`${dir}/a.crt`, certs.b.cert);
    assert.equal(await a.gw.mesh!.reload!("test"), "reloaded");
  } finally {
    await b.close(); // one after the other: b leaves, a stops dialling it, then a stops
    await a.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("mesh: a flood of pings and garbage on the mesh port is refused while inference flows", async () => {
  const worker = new FakeWorker();
  const port = freePort();
  const t = await startGateway([worker.url], { mesh: meshOn("a", port) });
  const flooder = new GrpcTransport({ host: "127.0.0.1", port: 0, clock: systemClock });
  try {
    const ping = (seq: number): PingMessage => ({
      kind: "ping",
      seq,
      from: "flooder",
      fromAddress: "127.0.0.1:1",
      to: "a",
      updates: [],
      fullState: false,
    });
    // Garbage bytes first: not HTTP/2 at all.
    const raw = await Deno.connect({ hostname: "127.0.0.1", port });
    await raw.write(new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n\x00\xff garbage"));
    raw.close();
    const results = await Promise.all(
      Array.from(
        { length: 3000 },
        (_, i) =>
          new Promise<string>((resolve) =>
            flooder.request(
              `127.0.0.1:${port}`,
              ping(i + 1),
              5000,
              (err) => resolve(err ? err.code : "ok"),
            )
          ),
      ),
    );
    assert.ok(results.filter((r) => r === "ok").length >= 1000, "the burst is served");
    assert.ok(results.some((r) => r !== "ok"), "the rest is refused");
    const res = await fetch(`${t.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", prompt: "hi" }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const flood = await metric(t, /^router_mesh_rejected_total\{reason="flood"\} (\d+)/m);
    assert.ok(Number(flood) > 0, `flood counted: ${flood}`);
    assert.equal(t.gw.mesh!.node.status, "ALIVE");
  } finally {
    await flooder.close();
    await t.close();
    await worker.close();
  }
});

/** Resolves once `t`'s registry holds a worker at `url` (or none, with `gone`). */
function registryHas(t: TestGateway, url: string, gone = false): Promise<void> {
  const holds = () => (t.gw.registry.byUrl(url) !== undefined) !== gone;
  if (holds()) return Promise.resolve();
  return new Promise((resolve) => {
    const off = t.gw.registry.subscribe(() => {
      if (!holds()) return;
      off();
      resolve();
    });
  });
}

Deno.test("mesh: a router that joins with no workers imports its peer's, routes to them, and loses them with the owner's delete", async () => {
  const worker = new FakeWorker();
  const pa = freePort();
  const a = await startGateway([worker.url], { mesh: meshOn("a", pa), apiKey: "client-key" });
  const b = await startGateway([], {
    mesh: meshOn("b", freePort(), { peerUrls: [`127.0.0.1:${pa}`] }),
  });
  try {
    await registryHas(b, worker.url);
    const imported = b.gw.registry.byUrl(worker.url)!;
    assert.equal(imported.origin, "mesh");
    assert.equal(imported.apiKey, null, "the API key stays with its router");
    await b.gw.whenReady(1);
    const res = await fetch(`${b.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", prompt: "hi" }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const status = await (await fetch(`${b.url}/mesh/status`)).json();
    assert.equal(status.store.workers.live, 1);
    const applied = await metric(
      b,
      /^router_mesh_store_ops_total\{namespace="workers",result="applied"\} (\d+)/m,
    );
    assert.ok(Number(applied) >= 1, `applied ${applied}`);
    // The owner removes it: gone everywhere.
    const id = a.gw.registry.byUrl(worker.url)!.id;
    const del = await fetch(`${a.url}/workers/${id}`, {
      method: "DELETE",
      headers: { authorization: "Bearer client-key" },
    });
    assert.equal(del.status, 202);
    await del.body?.cancel();
    await registryHas(b, worker.url, true);
  } finally {
    await b.close(); // one after the other: b leaves, a stops dialling it, then a stops
    await a.close();
    await worker.close();
  }
});
