import assert from "node:assert/strict";
import { defaultConfig, type GatewayConfig } from "../../lib/config/config.ts";
import { normalizeWorkerUrl, validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";

function valid(edit: (c: GatewayConfig) => void): GatewayConfig {
  const c = defaultConfig();
  edit(c);
  return validateConfig(c);
}

function invalid(edit: (c: GatewayConfig) => void, want: RegExp, name: string): void {
  const c = defaultConfig();
  edit(c);
  assert.throws(() => validateConfig(c), (e) => {
    assert.ok(e instanceof ConfigError, `${name}: ${e}`);
    assert.match(e.message, want, name);
    assert.ok(!e.message.includes("\n"), `${name}: more than one line`);
    return true;
  }, name);
}

Deno.test("validateConfig: the defaults are valid", () => {
  validateConfig(defaultConfig());
});

Deno.test("validateConfig: values at the edge of their range are accepted", () => {
  valid((c) => {
    c.port = 0;
    c.prometheusPort = 65535;
    c.retry.jitter = 0;
    c.retry.multiplier = 1;
    c.retry.maxAttempts = 1;
    c.circuitBreaker.failureThreshold = 1;
    c.circuitBreaker.successThreshold = 1;
    c.admission.maxConcurrentRequests = 1;
    c.admission.queueSize = 0;
    c.admission.queueTimeoutSecs = 0;
    c.loadMonitor.overloadTokenUsage = 1;
  });
  valid((c) => (c.retry.jitter = 1));
  valid((c) => (c.loadMonitor.overloadTokenUsage = 0.001));
});

Deno.test("validateConfig: out-of-range values fail naming the flag and the value", () => {
  const table: [string, (c: GatewayConfig) => void, RegExp][] = [
    ["port above 65535", (c) => (c.port = 65536), /^--port: invalid value '65536'/],
    ["negative port", (c) => (c.port = -1), /^--port: invalid value '-1'/],
    [
      "prometheus port",
      (c) => (c.prometheusPort = 70000),
      /^--prometheus-port: invalid value '70000'/,
    ],
    ["jitter above 1", (c) => (c.retry.jitter = 1.5), /^--retry-jitter-factor: .*'1\.5'/],
    ["negative jitter", (c) => (c.retry.jitter = -0.1), /^--retry-jitter-factor: .*'-0\.1'/],
    [
      "multiplier below 1",
      (c) => (c.retry.multiplier = 0.5),
      /^--retry-backoff-multiplier: .*'0\.5'/,
    ],
    ["no attempts", (c) => (c.retry.maxAttempts = 0), /^--retry-max-retries: .*'0'/],
    [
      "cb failure threshold 0",
      (c) => (c.circuitBreaker.failureThreshold = 0),
      /^--cb-failure-threshold: /,
    ],
    [
      "cb success threshold 0",
      (c) => (c.circuitBreaker.successThreshold = 0),
      /^--cb-success-threshold: /,
    ],
    [
      "health failure threshold 0",
      (c) => (c.health.failureThreshold = 0),
      /^--health-failure-threshold: /,
    ],
    [
      "queue timeout 0 with a queue",
      (c) => {
        c.admission.queueSize = 10;
        c.admission.queueTimeoutSecs = 0;
      },
      /^--queue-timeout-secs: .*--queue-size/,
    ],
    [
      "max concurrent 0",
      (c) => (c.admission.maxConcurrentRequests = 0),
      /^--max-concurrent-requests: invalid value '0'/,
    ],
    [
      "max concurrent -2",
      (c) => (c.admission.maxConcurrentRequests = -2),
      /^--max-concurrent-requests: /,
    ],
    [
      "tenant limits without their file",
      (c) => (c.tenantRateLimit.enabled = true),
      /^--tenant-rate-limit-config: required with --tenant-rate-limit-enabled/,
    ],
    [
      "cluster-wide tenant limits without the mesh",
      (c) => {
        c.tenantRateLimit = { enabled: true, configPath: "/x.yaml", scope: "cluster", syncMs: 100 };
      },
      /^--tenant-rate-limit-scope: invalid value 'cluster'; .*--enable-mesh/,
    ],
    [
      "a tenant key without its tenant",
      (c) => (c.tenants.apiKeys = ["secret"]),
      /^--tenant-api-key: invalid value '\*\*\*'; expected tenant:key/,
    ],
    [
      "one key for two tenants",
      (c) => (c.tenants.apiKeys = ["red:k", "blue:k"]),
      /^--tenant-api-key: invalid value 'blue:\*\*\*'; the key is also tenant 'red''s/,
    ],
    [
      "a tenant key equal to --api-key",
      (c) => {
        c.apiKey = "k";
        c.tenants.apiKeys = ["red:k"];
      },
      /^--tenant-api-key: .*also --api-key's/,
    ],
    [
      "negative refill rate",
      (c) => (c.admission.rateLimitTokensPerSecond = -1),
      /^--rate-limit-tokens-per-second: invalid value '-1'/,
    ],
    [
      "overload token usage 0",
      (c) => (c.loadMonitor.overloadTokenUsage = 0),
      /^--worker-overload-token-usage: .*'0'/,
    ],
    [
      "overload token usage above 1",
      (c) => (c.loadMonitor.overloadTokenUsage = 1.2),
      /^--worker-overload-token-usage: .*'1\.2'/,
    ],
    [
      "overload waiting requests 0",
      (c) => (c.loadMonitor.overloadWaitingRequests = 0),
      /^--worker-overload-waiting-requests: /,
    ],
    ["empty api key", (c) => (c.apiKey = "  "), /^--api-key: /],
    [
      "health endpoint without slash",
      (c) => (c.health.endpoint = "health"),
      /^--health-check-endpoint: /,
    ],
    ["request timeout 0", (c) => (c.requestTimeoutSecs = 0), /^--request-timeout-secs: /],
    ["bad header name", (c) => (c.routingKeyHeaders = ["x key"]), /invalid value 'x key'/],
    [
      "bad request id header name",
      (c) => (c.requestIdHeaders = ["x-id", "x id"]),
      /^--request-id-headers: invalid value 'x id'; expected an HTTP header name$/,
    ],
  ];
  for (const [name, edit, want] of table) invalid(edit, want, name);
});

Deno.test("validateConfig: worker URLs are checked and lose their trailing slash", () => {
  const c = valid((c) => (c.workerUrls = ["http://a:8000/", "https://b.example//", "http://c"]));
  assert.deepEqual(c.workerUrls, ["http://a:8000", "https://b.example", "http://c"]);
});

Deno.test("validateConfig: returns a normalised copy and leaves its input alone", () => {
  const c = defaultConfig();
  c.workerUrls = ["http://a:1/"];
  c.pd.prefill = [{ url: "http://p:1/", bootstrapPort: null }];
  c.mesh = { ...c.mesh, enabled: true, host: " fd00::1 ", advertiseHost: "fd00::2" };
  const before = structuredClone(c);
  const v = validateConfig({ ...c, pd: { ...c.pd, enabled: false, prefill: [] } });
  assert.deepEqual(c, before);
  assert.notEqual(v, c);
  assert.deepEqual(v.workerUrls, ["http://a:1"]);
  assert.equal(v.mesh.host, "[fd00::1]");
  assert.equal(v.mesh.advertiseHost, "[fd00::2]");
  assert.deepEqual(validateConfig(v), v, "a normalised config is its own normal form");
  const pd = { ...before, workerUrls: [], pd: { ...before.pd, enabled: true } };
  assert.equal(validateConfig(pd).pd.prefill[0].url, "http://p:1");
  assert.deepEqual(pd.pd.prefill, before.pd.prefill);
});

Deno.test("validateConfig: duplicate worker URLs are rejected, trailing slash or not", () => {
  invalid(
    (c) => (c.workerUrls = ["http://a:8000", "http://b:8000", "http://a:8000/"]),
    /^--worker-urls: invalid value 'http:\/\/a:8000'; each worker URL may appear once/,
    "duplicate",
  );
});

Deno.test("validateConfig: grpc:// workers need a tokenizer, and take host:port only", () => {
  for (const url of ["grpc://a:9000", "grpcs://a:9000"]) {
    invalid(
      (c) => (c.workerUrls = [url]),
      /^--worker-urls: invalid value 'grpcs?:\/\/a:9000'; gRPC workers take token ids: give --model-path or --tokenizer-path/,
      url,
    );
    const c = { ...defaultConfig(), workerUrls: [url], modelPath: "/models/qwen3" };
    assert.deepEqual(validateConfig(c).workerUrls, [url]);
  }
  for (const url of ["grpc://a", "grpc://a:9000/v1"]) {
    assert.throws(() => normalizeWorkerUrl(url), /grpc:\/\/host:port, with no path/);
  }
});

Deno.test("normalizeWorkerUrl: only absolute http(s) or grpc(s) URLs without query or fragment", () => {
  const bad: [string, RegExp][] = [
    ["ftp://a", /http:\/\/, https:\/\/, grpc:\/\/ or grpcs:\/\//],
    ["ws://a:1", /http:\/\/, https:\/\/, grpc:\/\/ or grpcs:\/\//],
    ["a:8000", /http:\/\/, https:\/\/, grpc:\/\/ or grpcs:\/\//],
    ["127.0.0.1:8000", /absolute URL/],
    ["not a url", /absolute URL/],
    ["http://a:1/?x=1", /no query or fragment/],
    ["http://a:1/#top", /no query or fragment/],
  ];
  for (const [url, want] of bad) {
    assert.throws(() => normalizeWorkerUrl(url), (e) => {
      assert.ok(e instanceof ConfigError, url);
      assert.match(e.message, want, url);
      assert.ok(e.message.startsWith("--worker-urls: "), url);
      return true;
    });
  }
  assert.equal(normalizeWorkerUrl("http://a:1/v1/"), "http://a:1/v1");
  assert.throws(() => normalizeWorkerUrl("x", "--url"), { message: /^--url: / });
});

Deno.test("validateConfig: a TLS certificate and its key come together, for the port and workers", () => {
  invalid(
    (c) => {
      c.tls.certPath = "/etc/smg/tls.crt";
    },
    /^--tls-key-path: required with --tls-cert-path \('\/etc\/smg\/tls.crt'\)$/,
    "cert alone",
  );
  invalid(
    (c) => {
      c.tls.keyPath = "/etc/smg/tls.key";
    },
    /^--tls-cert-path: required with --tls-key-path \('\/etc\/smg\/tls.key'\)$/,
    "key alone",
  );
  invalid(
    (c) => {
      c.tls.clientCertPath = "/c.pem";
    },
    /^--client-key-path: required with --client-cert-path/,
    "client cert alone",
  );
  invalid(
    (c) => {
      c.tls.clientKeyPath = "/k.pem";
    },
    /^--client-cert-path: required with --client-key-path/,
    "client key alone",
  );
  invalid(
    (c) => {
      c.tls.caCertPaths = ["/ca.pem", " "];
    },
    /^--ca-cert-paths: invalid value ' '; must not be empty$/,
    "blank CA path",
  );
  valid((c) => {
    c.tls = {
      certPath: "/a.crt",
      keyPath: "/a.key",
      clientCertPath: "/c.crt",
      clientKeyPath: "/c.key",
      caCertPaths: ["/ca1.pem", "/ca2.pem"],
    };
  });
});
