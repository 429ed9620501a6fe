/**
 * Tracing's settings from SMG's flags and the OTEL_* variables: off unless asked (and off with
 * OTEL_SDK_DISABLED), the flag before the signal's variable before the general one, the HTTP
 * path added where the spec adds it, headers and resource attributes percent-decoded, the
 * sampler and batch settings read, and a value it cannot use refused naming its variable.
 */

import assert from "node:assert/strict";
import { ConfigError } from "../../lib/core/errors.ts";
import { collectorGrant, tracingSettings } from "../../lib/tracing/settings.ts";
import { gatewayNetGrant } from "../../lib/server/net_grant.ts";
import { testConfig } from "../../support/gateway.ts";

const on = { enabled: true, endpoint: null };
const env = (vars: Record<string, string>) => (k: string) => vars[k];

Deno.test("settings: off unless --enable-trace; OTEL_SDK_DISABLED wins", () => {
  assert.equal(tracingSettings({ enabled: false, endpoint: "x:1" }, env({})), null);
  assert.equal(tracingSettings(on, env({ OTEL_SDK_DISABLED: "true" })), null);
  assert.notEqual(tracingSettings(on, env({ OTEL_SDK_DISABLED: "false" })), null);
});

Deno.test("settings: SMG's defaults — gRPC to localhost:4317, service smg, parent-based always on", () => {
  const s = tracingSettings(on, env({}), "1.2.3")!;
  assert.equal(s.endpoint, "http://localhost:4317");
  assert.equal(s.protocol, "grpc");
  assert.equal(s.sampler, "parentbased_always_on");
  assert.deepEqual(s.resource.slice(0, 4), ["service.name", "smg", "service.version", "1.2.3"]);
  assert.deepEqual(s.queue, { maxQueue: 2048, batch: 512, delayMs: 500, timeoutMs: 10_000 });
  assert.deepEqual(collectorGrant(s), ["localhost:4317", "127.0.0.1:4317", "[::1]:4317"]);
});

Deno.test("settings: the flag, then the signal's variable, then the general one", () => {
  const vars = {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:1111/custom",
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://base:2222/prefix/",
  };
  assert.equal(
    tracingSettings({ enabled: true, endpoint: "col:4317" }, env(vars))!.endpoint,
    "http://col:4317",
  );
  assert.equal(tracingSettings(on, env(vars))!.endpoint, "http://traces:1111");
  const http = { ...vars, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" };
  assert.equal(tracingSettings(on, env(http))!.endpoint, "http://traces:1111/custom");
  const general = {
    OTEL_EXPORTER_OTLP_ENDPOINT: "https://base:2222/prefix/",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
  };
  assert.equal(tracingSettings(on, env(general))!.endpoint, "https://base:2222/prefix/v1/traces");
  assert.equal(
    tracingSettings(
      { enabled: true, endpoint: "col:4318" },
      env({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" }),
    )!.endpoint,
    "http://col:4318/v1/traces",
  );
  assert.equal(
    tracingSettings(on, env({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" }))!.endpoint,
    "http://localhost:4318/v1/traces",
  );
});

Deno.test("settings: headers, resource, sampler and batching from their variables", () => {
  const s = tracingSettings(
    on,
    env({
      OTEL_EXPORTER_OTLP_HEADERS: "x-general=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=a%20b, x-team=infra",
      OTEL_RESOURCE_ATTRIBUTES:
        "service.name=ignored,deployment.environment=prod,k8s.pod.name=smg-0",
      OTEL_SERVICE_NAME: "router",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.1",
      OTEL_BSP_SCHEDULE_DELAY: "2000",
      OTEL_BSP_MAX_QUEUE_SIZE: "100",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "50",
      OTEL_EXPORTER_OTLP_TIMEOUT: "3000",
    }),
  )!;
  assert.deepEqual(s.headers, [["api-key", "a b"], ["x-team", "infra"]]);
  assert.deepEqual(s.resource.slice(0, 6), [
    "service.name",
    "router",
    "deployment.environment",
    "prod",
    "k8s.pod.name",
    "smg-0",
  ]);
  assert.equal(s.sampler, "parentbased_traceidratio");
  assert.equal(s.ratio, 0.1);
  assert.deepEqual(s.queue, { maxQueue: 100, batch: 50, delayMs: 2000, timeoutMs: 3000 });
  // Without OTEL_SERVICE_NAME, the resource's service.name.
  const r = tracingSettings(on, env({ OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs" }))!;
  assert.deepEqual(r.resource.slice(0, 2), ["service.name", "from-attrs"]);
});

Deno.test("settings: a value tracing cannot use is refused, naming its variable", () => {
  const refused = (vars: Record<string, string>, re: RegExp, endpoint: string | null = null) =>
    assert.throws(
      () => tracingSettings({ enabled: true, endpoint }, env(vars)),
      (e) => e instanceof ConfigError && re.test(e.message),
    );
  refused(
    { OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
    /^OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http\/protobuf/,
  );
  refused({ OTEL_TRACES_SAMPLER: "jaeger_remote" }, /^OTEL_TRACES_SAMPLER: one of/);
  refused(
    { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" },
    /^OTEL_TRACES_SAMPLER_ARG/,
  );
  refused(
    { OTEL_EXPORTER_OTLP_HEADERS: "novalue" },
    /^OTEL_EXPORTER_OTLP_HEADERS: 'novalue' is not key=value/,
  );
  refused({ OTEL_BSP_MAX_QUEUE_SIZE: "-1" }, /^OTEL_BSP_MAX_QUEUE_SIZE: an integer >= 1/);
  refused(
    { OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://x" },
    /^OTEL_EXPORTER_OTLP_ENDPOINT: the collector is reached over/,
  );
  refused({}, /^--otlp-traces-endpoint: not a host:port or URL/, "http://[bad");
});

Deno.test("net grant: the collector joins the workers, nothing more", () => {
  const c = testConfig({
    workerUrls: ["http://10.0.0.5:8000"],
    tracing: { enabled: true, endpoint: "otel.example:4317" },
  });
  const g = gatewayNetGrant(c, () => null, env({}));
  assert.equal(g.mode, "narrow");
  if (g.mode !== "narrow") return;
  assert.ok(g.allow.includes("10.0.0.5:8000"));
  assert.ok(g.allow.includes("otel.example:4317"));
  const off = gatewayNetGrant(
    { ...c, tracing: { enabled: false, endpoint: "otel.example:4317" } },
    () => null,
    env({}),
  );
  assert.ok(off.mode === "narrow" && !off.allow.includes("otel.example:4317"));
});
