/**
 * The mesh alert of `deploy/prometheus/mesh-alerts.yml` against a real Prometheus (Debian's
 * `prometheus`, which .ci/run installs), started on loopback to scrape three mesh routers every
 * second: `SMGMeshStreamsMissing` (its `for:` shortened to 0s in the test's copy) does not fire
 * with all three up and streaming, and fires once one router is killed. Waits by polling Prometheus's API (`poll`): its answers
 * change inside another process, with no event this test could hear.
 */

import assert from "node:assert/strict";
import {
  type GatewayProcess,
  hasCommand,
  meshRouterArgs,
  spawnGateway,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { poll } from "../../support/wait.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const RULES = new URL("../../deploy/prometheus/mesh-alerts.yml", import.meta.url).pathname;

const hasPrometheus = hasCommand("prometheus");

Deno.test({
  name: "deploy: a real Prometheus fires SMGMeshStreamsMissing only once a router is gone",
  ignore: !hasPrometheus,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = Deno.makeTempDirSync({ prefix: "smg-prom-" });
    const meshPorts = [freePort(), freePort(), freePort()];
    const metricPorts = [freePort(), freePort(), freePort()];
    const routers: GatewayProcess[] = [];
    let prom: Deno.ChildProcess | null = null;
    try {
      for (const [i, p] of meshPorts.entries()) {
        const seeds = i === 0 ? [] : [`127.0.0.1:${meshPorts[0]}`];
        routers.push(await spawnGateway(MAIN, meshRouterArgs(`r${i}`, p, seeds, metricPorts[i])));
      }
      Deno.writeTextFileSync(
        `${dir}/rules.yml`,
        Deno.readTextFileSync(RULES).replaceAll(/for: \d+m/g, "for: 0s"),
      );
      Deno.writeTextFileSync(
        `${dir}/prometheus.yml`,
        `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["${dir}/rules.yml"]
scrape_configs:
  - job_name: smg
    static_configs:
      - targets: [${metricPorts.map((p) => `"127.0.0.1:${p}"`).join(", ")}]
`,
      );
      const promPort = freePort();
      prom = new Deno.Command("prometheus", {
        args: [
          `--config.file=${dir}/prometheus.yml`,
          `--storage.tsdb.path=${dir}/data`,
          `--web.listen-address=127.0.0.1:${promPort}`,
        ],
        stdout: "null",
        stderr: "null",
      }).spawn();
      const query = async (q: string) => {
        const r = await fetch(
          `http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(q)}`,
        );
        return (await r.json()).data.result as {
          metric: Record<string, string>;
          value: [number, string];
        }[];
      };
      const firing = async () =>
        (await query('ALERTS{alertname="SMGMeshStreamsMissing",alertstate="firing"}')).length > 0;
      // All three scraped, three streams counted, and the alert (evaluated since) quiet.
      const every = 250; // Prometheus scrapes and evaluates every second
      await poll(
        async () => {
          const r = await query('count(router_mesh_peer_connections{peer!=""} == 1)');
          return r.length === 1 && r[0].value[1] === "3";
        },
        "three streams in Prometheus",
        60_000,
        every,
      );
      // It may have fired while the mesh formed; with every stream up it resolves and stays so.
      await poll(async () => !(await firing()), "the alert quiet", 60_000, every);
      const streams = await query('count(router_mesh_peer_connections{peer!=""} == 1)');
      assert.equal(streams[0]?.value[1], "3", "quiet with every stream up");
      routers[2].child.kill("SIGKILL");
      await poll(firing, "the alert firing", 60_000, every);
    } finally {
      try {
        prom?.kill("SIGKILL");
        await prom?.status;
      } catch { /* gone */ }
      for (const r of routers.reverse()) {
        try {
          r.child.kill("SIGTERM");
        } catch { /* gone */ }
        await r.exited;
      }
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
