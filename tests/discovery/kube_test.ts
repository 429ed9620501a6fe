/**
 * The pod API with the real `@kubernetes/client-node` against the API stand-in: configuration
 * from `KUBECONFIG`, the bearer token on lists (client-node, paged) and on the watch (fetch),
 * events after the list, a reset watch connection noticed and resumed; and the gateway with
 * `--service-discovery` registering the pods it finds, removing the one deleted.
 */

import assert from "node:assert/strict";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { systemClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { connectPods } from "../../lib/discovery/kube.ts";
import type { Pod } from "../../lib/discovery/pods.ts";
import { PodWatch } from "../../lib/discovery/watch.ts";
import { Gateway } from "../../lib/server/app.ts";
import { FakeKube, pod } from "../support/fake_kube.ts";
import { Waiters } from "../../support/wait.ts";

async function withKubeconfig<T>(k: FakeKube, fn: () => Promise<T>): Promise<T> {
  const path = k.kubeconfig();
  const before = Deno.env.get("KUBECONFIG");
  Deno.env.set("KUBECONFIG", path);
  try {
    return await fn();
  } finally {
    if (before === undefined) Deno.env.delete("KUBECONFIG");
    else Deno.env.set("KUBECONFIG", before);
    Deno.removeSync(path);
  }
}

Deno.test({
  name: "kube: client-node lists with the kubeconfig's token; the fetch watch survives a reset",
  sanitizeResources: false, // client-node's HTTP agent keeps its sockets alive
  sanitizeOps: false,
  fn: async () => {
    const k = new FakeKube();
    for (let i = 0; i < 7; i++) k.apply(pod(`w${i}`, `10.0.0.${i + 1}`, { app: "sglang" }));
    await withKubeconfig(k, async () => {
      const api = await connectPods("default");
      assert.equal(api.origin, "kubeconfig");
      const pods = new Map<string, Pod>();
      const w = new Waiters();
      const watch = new PodWatch({
        name: "test",
        source: api.source("app=sglang"),
        log: silentLogger,
        clock: systemClock,
        backoffMs: 20,
        handlers: {
          onList: (l) => {
            pods.clear();
            for (const p of l) pods.set(p.metadata!.name!, p);
            w.poke();
          },
          onEvent: (t, p) => {
            if (t === "DELETED") pods.delete(p.metadata!.name!);
            else pods.set(p.metadata!.name!, p);
            w.poke();
          },
        },
      });
      watch.start();
      await w.wait(() => pods.size === 7, "the list");
      assert.ok(
        k.requests.some((r) =>
          r.startsWith("GET /api/v1/namespaces/default/pods?") && r.includes("limit=500")
        ),
        "listed by client-node",
      );
      k.apply(pod("w7", "10.0.0.8", { app: "sglang" }));
      await w.wait(() => pods.has("w7"), "an event");
      k.resetWatches();
      k.apply(pod("w8", "10.0.0.9", { app: "sglang" }));
      await w.wait(() => pods.has("w8"), "an event after the reset");
      assert.equal(watch.lists, 1);
      await watch.stop();
      api.close();
    });
    await k.close();
  },
});

Deno.test({
  name: "kube: the gateway with --service-discovery registers ready pods and removes a deleted one",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const k = new FakeKube();
    k.apply(pod("a", "127.0.0.11", { app: "sglang" }));
    k.apply(pod("b", "127.0.0.12", { app: "sglang" }, { ready: false }));
    await withKubeconfig(k, async () => {
      const config = validateConfig(parseGatewayArgs([
        "--service-discovery",
        "--selector",
        "app=sglang",
        "--service-discovery-port",
        "18000",
        "--service-discovery-namespace",
        "default",
      ]));
      const g = new Gateway({ config, log: silentLogger });
      const w = new Waiters();
      g.registry.subscribe(() => w.poke());
      const urls = () =>
        g.registry.all().filter((x) => x.status !== "draining").map((x) => x.url).sort();
      await g.start();
      try {
        await w.wait(() => urls().length === 1, "a registered");
        assert.deepEqual(urls(), ["http://127.0.0.11:18000"]);
        k.apply(pod("b", "127.0.0.12", { app: "sglang" }));
        await w.wait(() => urls().length === 2, "b ready");
        k.delete("default", "a");
        await w.wait(() => urls().length === 1, "a deleted");
        assert.deepEqual(urls(), ["http://127.0.0.12:18000"]);
        const text = await g.renderMetrics();
        assert.match(
          text,
          /smg_discovery_registrations_total\{source="kubernetes",result="ok"\} 2/,
        );
        assert.match(
          text,
          /smg_discovery_deregistrations_total\{source="kubernetes",reason="deleted"\} 1/,
        );
        assert.match(text, /smg_discovery_workers_discovered\{source="kubernetes"\} 1/);
      } finally {
        await g.stop();
      }
    });
    await k.close();
  },
});

Deno.test({
  name: "kube: no configuration anywhere is a clear error, not client-node's localhost:8080",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const saved = { home: Deno.env.get("HOME"), kc: Deno.env.get("KUBECONFIG") };
    const home = Deno.makeTempDirSync();
    Deno.env.set("HOME", home);
    Deno.env.delete("KUBECONFIG");
    try {
      await assert.rejects(() => connectPods(null), /no Kubernetes configuration found/);
    } finally {
      if (saved.home !== undefined) Deno.env.set("HOME", saved.home);
      if (saved.kc !== undefined) Deno.env.set("KUBECONFIG", saved.kc);
      Deno.removeSync(home, { recursive: true });
    }
  },
});
