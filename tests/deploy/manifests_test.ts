/**
 * `deploy/` is what it says: every container argument of the Kubernetes manifests is accepted
 * by the gateway's own flag parser and validation (with the pod's fields substituted), the Role
 * grants exactly the verbs discovery uses, the image is distroless, non-root and exposes the
 * three ports after `deno task compile`, and every metric the alert rules and the Grafana
 * dashboard name is one the gateway serves.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { KUBE_VERBS } from "../../lib/discovery/kube.ts";
import { MeshMetrics } from "../../lib/mesh/mesh_metrics.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { DiscoveryMetrics } from "../../lib/discovery/feature.ts";

const DEPLOY = new URL("../../deploy/", import.meta.url);
const read = (path: string) => Deno.readTextFileSync(new URL(path, DEPLOY));
// deno-lint-ignore no-explicit-any
const docs = (path: string): any[] => parseAllDocuments(read(path)).map((d) => d.toJS());

Deno.test("deploy: every container argument of the manifests passes the gateway's parser and checks", () => {
  const fields: Record<string, string> = { POD_NAME: "smg-0", POD_IP: "10.0.0.7" };
  let checked = 0;
  for (const file of ["kubernetes/statefulset.yaml", "kubernetes/deployment.yaml"]) {
    for (const doc of docs(file)) {
      for (const c of doc.spec.template.spec.containers) {
        const args = (c.args as string[]).map((a) =>
          a.replace(/\$\((\w+)\)/g, (_, v) => fields[v])
        );
        const config = validateConfig(parseGatewayArgs(args));
        assert.equal(config.discovery.enabled, true, file);
        checked++;
        const ports = c.ports.map((p: { containerPort: number }) => p.containerPort);
        assert.ok(ports.includes(config.port) && ports.includes(config.prometheusPort), file);
        if (config.mesh.enabled) {
          assert.ok(ports.includes(config.mesh.port), file);
          assert.equal(config.mesh.serverName, "smg-0", "named by the pod");
          const annotated = doc.spec.template.metadata.annotations["sglang.ai/mesh-port"];
          assert.equal(Number(annotated), config.mesh.port);
          assert.equal(doc.spec.serviceName, "smg-mesh");
        }
        assert.ok(
          doc.spec.template.spec.terminationGracePeriodSeconds > config.shutdownGracePeriodSecs,
        );
      }
    }
  }
  assert.equal(checked, 2);
});

Deno.test("deploy: the Role grants exactly what discovery calls", () => {
  const role = docs("kubernetes/rbac.yaml").find((d) => d.kind === "Role");
  assert.deepEqual(role.rules, [{ apiGroups: [""], resources: ["pods"], verbs: [...KUBE_VERBS] }]);
  const binding = docs("kubernetes/rbac.yaml").find((d) => d.kind === "RoleBinding");
  assert.equal(binding.roleRef.name, role.metadata.name);
  const sa = docs("kubernetes/statefulset.yaml")[0].spec.template.spec.serviceAccountName;
  assert.equal(binding.subjects[0].name, sa);
});

Deno.test("deploy: the image compiles in a build stage and runs distroless, non-root, on the three ports", () => {
  const df = read("Dockerfile");
  assert.match(df, /^RUN deno task compile$/m);
  assert.match(df, /^FROM gcr\.io\/distroless\/[^\s]+ *$/m);
  // Numeric: Kubernetes cannot verify runAsNonRoot against a user name.
  assert.match(df, /^USER [1-9]\d*:[1-9]\d*$/m);
  assert.match(df, /^EXPOSE 30000 29000 39527$/m);
  assert.match(df, /^COPY --from=build \/src\/dist\/smg /m);
  const compile = JSON.parse(Deno.readTextFileSync(new URL("../../deno.json", import.meta.url)))
    .tasks.compile as string;
  assert.ok(!compile.includes("--allow-run") && !compile.includes("--allow-write"), compile);
  assert.match(compile, /--allow-read=\/var\/run\/secrets\/kubernetes\.io\/serviceaccount/);
});

Deno.test("deploy: every metric the alert rules and the dashboard name is one the gateway serves", () => {
  const metrics = new Metrics();
  new MeshMetrics(metrics.registry);
  new DiscoveryMetrics(metrics);
  const served = new Set(metrics.registry.getMetricsAsArray().map((m) => m.name));
  const dashboard = JSON.parse(read("grafana/smg-dashboard.json"));
  // deno-lint-ignore no-explicit-any
  const exprs: string[] = dashboard.panels.flatMap((p: any) => p.targets.map((t: any) => t.expr));
  const names = [read("prometheus/mesh-alerts.yml"), ...exprs].flatMap((t) =>
    [...t.matchAll(/\b((?:smg|router_mesh)_[a-z_]+)/g)].map((m) => m[1])
  );
  assert.ok(names.length >= 10);
  for (const n of names) {
    assert.ok(served.has(n) || served.has(n.replace(/_(bucket|sum|count)$/, "")), n);
  }
  const titles = dashboard.panels.map((p: { title: string }) => p.title).join(" | ");
  for (const want of [/per worker/, /TTFT/, /branch/, /match ratio/, /members/, /streams/]) {
    assert.match(titles, want);
  }
});
