/**
 * End to end on loopback: three router processes find each other only through router discovery
 * (`--router-selector`, no `--mesh-peer-urls`) over the API stand-in, and their workers through
 * `--selector` (simulated workers as "pods" on 127.0.0.2 and 127.0.0.3); they form a mesh,
 * route, drop a worker whose pod is deleted, and mark DOWN a router whose pod is deleted.
 * Waits on log lines, never on sleeps.
 */

import assert from "node:assert/strict";
import { FakeKube, pod } from "../support/fake_kube.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { type GatewayProcess, spawnGateway } from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const ROUTER = { "app.kubernetes.io/component": "router" };
const WORKER = { app: "sglang" };

async function stop(p: GatewayProcess): Promise<void> {
  try {
    p.child.kill("SIGTERM");
  } catch { /* gone */ }
  await p.exited;
}

Deno.test({
  name:
    "discovery processes: routers found through their pods form a mesh and follow pod deletions",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const k = new FakeKube();
    const port = freePort();
    const workers = [
      new FakeWorker({}, { hostname: "127.0.0.2", port }),
      new FakeWorker({}, { hostname: "127.0.0.3", port }),
    ];
    k.apply(pod("w0", "127.0.0.2", WORKER));
    k.apply(pod("w1", "127.0.0.3", WORKER));
    const meshPorts = [freePort(), freePort(), freePort()];
    for (const [i, p] of meshPorts.entries()) {
      k.apply(
        pod(`r${i}`, "127.0.0.1", ROUTER, { annotations: { "sglang.ai/mesh-port": String(p) } }),
      );
    }
    const kubeconfig = k.kubeconfig();
    Deno.env.set("KUBECONFIG", kubeconfig);
    const routers: GatewayProcess[] = [];
    try {
      for (const [i, p] of meshPorts.entries()) {
        routers.push(
          await spawnGateway(
            MAIN,
            [
              "--host",
              "127.0.0.1",
              "--port",
              "0",
              "--prometheus-port",
              String(freePort()),
              "--shutdown-grace-period-secs",
              "0",
              "--policy",
              "round_robin",
              "--enable-mesh",
              "--mesh-server-name",
              `r${i}`,
              "--mesh-host",
              "127.0.0.1",
              "--mesh-port",
              String(p),
              "--service-discovery",
              "--selector",
              "app=sglang",
              "--service-discovery-port",
              String(port),
              "--router-selector",
              "app.kubernetes.io/component=router",
            ],
            undefined,
            ["--allow-env", `--allow-read=${kubeconfig}`],
          ),
        );
      }
      // Everyone ALIVE with a stream, found only through the pods.
      const all =
        /Status:(?=[^\n]*r0=ALIVE)(?=[^\n]*r1=ALIVE)(?=[^\n]*r2=ALIVE)[^\n]*\+stream[^\n]*\+stream/;
      await Promise.all(routers.map((r) => r.waitForOutput(all)));
      const ready = (u: string) =>
        new RegExp(`msg="worker ready"[^\\n]*worker=${u.replaceAll(".", "\\.")}`);
      await Promise.all(routers.flatMap((r) => workers.map((w) => r.waitForOutput(ready(w.url)))));
      const res = await fetch(`${routers[1].url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "test-model", prompt: "hi" }),
      });
      assert.equal(res.status, 200);
      await res.body?.cancel();
      // A worker pod deleted: every router drops it.
      k.delete("default", "w0");
      const dropped = /msg="deregistering a discovered worker"[^\n]*reason=deleted/;
      await Promise.all(routers.map((r) => r.waitForOutput(dropped)));
      // A router pod deleted (its process killed, as Kubernetes would): the others mark it DOWN
      // from the pod event, before their own suspicion of it could time out. (A router whose
      // pod is deleted while it still runs refutes that, being fresher than the pod event.)
      routers[2].child.kill("SIGKILL");
      k.delete("default", "r2");
      // One of them hears of the pod first and tells the other (which may hear it by gossip
      // before its own watch delivers the event).
      const fromPod = /msg="mesh member down: its pod is gone"[^\n]*peer=r2/;
      await Promise.any(routers.slice(0, 2).map((r) => r.waitForOutput(fromPod)));
      await Promise.all(routers.slice(0, 2).map((r) => r.waitForOutput(/Status:[^\n]*r2=DOWN/)));
    } finally {
      for (const r of routers.reverse()) await stop(r);
      for (const w of workers) await w.close();
      Deno.env.delete("KUBECONFIG");
      Deno.removeSync(kubeconfig);
      await k.close();
    }
  },
});
