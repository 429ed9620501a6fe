/**
 * SMG's documented mesh alert rules, as deploy/prometheus/mesh-alerts.yml holds them, are valid
 * Prometheus rules (promtool, which .ci/run installs) and name only metrics the gateway exports.
 */

import assert from "node:assert/strict";
import client from "prom-client";
import { MeshMetrics } from "../../lib/mesh/mesh_metrics.ts";
import { hasCommand } from "../../support/gateway_process.ts";

const RULES = new URL("../../deploy/prometheus/mesh-alerts.yml", import.meta.url).pathname;

const hasPromtool = hasCommand("promtool");

Deno.test({ name: "deploy: mesh alert rules pass promtool", ignore: !hasPromtool }, async () => {
  const out = await new Deno.Command("promtool", {
    args: ["check", "rules", RULES],
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, text);
  assert.match(text, /SUCCESS: 5 rules found/);
});

Deno.test("deploy: mesh alert rules use exported metric names", () => {
  const r = new client.Registry();
  new MeshMetrics(r);
  const exported = new Set(r.getMetricsAsArray().map((m) => m.name));
  const used = [...Deno.readTextFileSync(RULES).matchAll(/\b(router_mesh_[a-z_]+)/g)].map((m) =>
    m[1]
  );
  assert.ok(used.length >= 3);
  // A histogram's series carry _bucket, _sum and _count after its name.
  for (const name of used) {
    assert.ok(exported.has(name) || exported.has(name.replace(/_(bucket|sum|count)$/, "")), name);
  }
});
