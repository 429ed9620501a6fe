import assert from "node:assert/strict";
import process from "node:process";
import { HelpShown, parseGatewayArgs } from "../../lib/config/cli.ts";
import { ConfigError } from "../../lib/core/errors.ts";

/** Runs `fn` with process.stdout captured (commander prints --help and --version there). */
function captureStdout(fn: () => void): string {
  const original = process.stdout.write;
  let out = "";
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
    return true;
  }) as typeof process.stdout.write;
  try {
    fn();
  } finally {
    process.stdout.write = original;
  }
  return out;
}

Deno.test("parseGatewayArgs: no flags gives SMG's defaults", () => {
  const c = parseGatewayArgs([]);
  assert.equal(c.host, "0.0.0.0");
  assert.equal(c.port, 30000);
  assert.equal(c.prometheusPort, 29000);
  assert.equal(c.policy, "cache_aware");
  assert.deepEqual(c.workerUrls, []);
  assert.equal(c.apiKey, null);
  assert.equal(c.requestTimeoutSecs, 1800);
  assert.equal(c.maxPayloadSize, 536870912);
  assert.deepEqual(c.requestIdHeaders, [
    "x-request-id",
    "x-correlation-id",
    "x-trace-id",
    "request-id",
  ]);
  assert.deepEqual(c.routingKeyHeaders, ["x-smg-routing-key"]);
  assert.equal(c.retry.maxAttempts, 5);
  assert.equal(c.retry.disabled, false);
  assert.deepEqual(
    [
      c.circuitBreaker.failureThreshold,
      c.circuitBreaker.successThreshold,
      c.circuitBreaker.timeoutSecs,
      c.circuitBreaker.windowSecs,
    ],
    [10, 3, 60, 120],
  );
  assert.deepEqual(
    [
      c.health.intervalSecs,
      c.health.timeoutSecs,
      c.health.failureThreshold,
      c.health.successThreshold,
    ],
    [60, 5, 3, 2],
  );
  assert.equal(c.health.endpoint, "/health");
  assert.deepEqual(c.admission, {
    maxConcurrentRequests: -1,
    queueSize: 100,
    queueTimeoutSecs: 60,
    rateLimitTokensPerSecond: null,
  });
  assert.equal(c.loadMonitor.overloadTokenUsage, null);
  assert.equal(c.loadMonitor.overloadWaitingRequests, null);
});

Deno.test("parseGatewayArgs: each call starts from fresh defaults", () => {
  parseGatewayArgs(["--worker-urls", "http://a:1", "--cb-failure-threshold", "2"]);
  const c = parseGatewayArgs([]);
  assert.deepEqual(c.workerUrls, []);
  assert.equal(c.circuitBreaker.failureThreshold, 10);
});

Deno.test("parseGatewayArgs: 'launch' and 'start' prefixes are accepted", () => {
  for (const prefix of ["launch", "start"]) {
    const c = parseGatewayArgs([prefix, "--port", "8080"]);
    assert.equal(c.port, 8080, prefix);
  }
});

Deno.test("parseGatewayArgs: flags land in the config", () => {
  const c = parseGatewayArgs([
    "--host=127.0.0.1",
    "--port=8080",
    "--policy",
    "Round_Robin",
    "--prometheus-port",
    "9100",
    "--api-key",
    "sk-1",
    "--max-concurrent-requests",
    "-1",
    "--queue-size",
    "7",
    "--retry-backoff-multiplier",
    "2.5",
    "--retry-jitter-factor",
    "0",
    "--disable-retries",
    "--disable-circuit-breaker",
    "--log-json",
    "--log-level",
    "debug",
    "--random-seed",
    "42",
    "--request-id-headers",
    "X-My-Id",
    "X-Other",
    "--health-check-endpoint",
    "/ping",
  ]);
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.port, 8080);
  assert.equal(c.policy, "round_robin");
  assert.equal(c.prometheusPort, 9100);
  assert.equal(c.apiKey, "sk-1");
  assert.equal(c.admission.maxConcurrentRequests, -1);
  assert.equal(c.admission.queueSize, 7);
  assert.equal(c.retry.multiplier, 2.5);
  assert.equal(c.retry.jitter, 0);
  assert.equal(c.retry.disabled, true);
  assert.equal(c.circuitBreaker.disabled, true);
  assert.equal(c.logJson, true);
  assert.equal(c.logLevel, "debug");
  assert.equal(c.randomSeed, 42);
  assert.deepEqual(c.requestIdHeaders, ["x-my-id", "x-other"]);
  assert.equal(c.health.endpoint, "/ping");
});

Deno.test("parseGatewayArgs: --worker-urls takes several values, and may repeat", () => {
  const c = parseGatewayArgs([
    "--worker-urls",
    "http://a:1",
    "http://b:2",
    "--policy",
    "random",
  ]);
  assert.deepEqual(c.workerUrls, ["http://a:1", "http://b:2"]);
  assert.equal(c.policy, "random");
  const repeated = parseGatewayArgs(["--worker-urls", "http://a:1", "--worker-urls", "http://b:2"]);
  assert.deepEqual(repeated.workerUrls, ["http://a:1", "http://b:2"]);
});

Deno.test("parseGatewayArgs: --worker-auto-recovery is --remove-unhealthy-workers", () => {
  assert.equal(parseGatewayArgs([]).health.removeUnhealthy, false);
  assert.equal(parseGatewayArgs(["--worker-auto-recovery"]).health.removeUnhealthy, true);
  assert.equal(parseGatewayArgs(["--remove-unhealthy-workers"]).health.removeUnhealthy, true);
});

Deno.test("parseGatewayArgs: --worker-overload-protection sets the token ceiling to 0.9", () => {
  const table: [string[], number | null][] = [
    [[], null],
    [["--worker-overload-protection"], 0.9],
    [["--worker-overload-protection", "--worker-overload-token-usage", "0.5"], 0.5],
    [["--worker-overload-token-usage", "0.5", "--worker-overload-protection"], 0.5],
    [["--worker-overload-token-usage", "0.7"], 0.7],
  ];
  for (const [args, want] of table) {
    assert.equal(parseGatewayArgs(args).loadMonitor.overloadTokenUsage, want, args.join(" "));
  }
});

Deno.test("parseGatewayArgs: bad input throws a one-line ConfigError naming the flag", () => {
  const table: [string[], RegExp][] = [
    [["--bogus"], /^--bogus: unknown flag/],
    [["--port", "abc"], /^--port: invalid value 'abc'; expected an integer$/],
    [["--port", "3.5"], /^--port: invalid value '3\.5'/],
    [["--port"], /^--port: a value is required$/],
    [["--retry-max-retries", "1e3"], /^--retry-max-retries: invalid value '1e3'/],
    [["--retry-jitter-factor", "lots"], /^--retry-jitter-factor: invalid value 'lots'/],
    [["--policy", "fastest"], /^--policy: invalid value 'fastest'; allowed: random, /],
    [["--log-level", "verbose"], /^--log-level: invalid value 'verbose'/],
    [["launch", "--health-check-interval-secs", "x"], /^--health-check-interval-secs: /],
    [["serve"], /unexpected argument/],
    [["--log-json", "true"], /unexpected argument/],
  ];
  for (const [args, want] of table) {
    assert.throws(() => parseGatewayArgs(args), (e) => {
      assert.ok(e instanceof ConfigError, `${args.join(" ")}: ${e}`);
      assert.match(e.message, want, args.join(" "));
      assert.ok(!e.message.includes("\n"), `${args.join(" ")}: more than one line`);
      return true;
    });
  }
});

/** Runs `parseGatewayArgs(args)` and returns what it threw and printed. */
function shown(args: string[], version?: string): { thrown: unknown; out: string } {
  let thrown: unknown;
  const out = captureStdout(() => {
    try {
      parseGatewayArgs(args, version);
    } catch (e) {
      thrown = e;
    }
  });
  return { thrown, out };
}

Deno.test("parseGatewayArgs: --help prints the flags and throws HelpShown", () => {
  const { thrown, out } = shown(["--help"]);
  assert.ok(thrown instanceof HelpShown, String(thrown));
  assert.match(out, /--worker-urls/);
  assert.match(out, /--cb-failure-threshold <value>.*\(default: 10\)/);
  // Aliases are accepted but not advertised.
  assert.doesNotMatch(out, /--worker-auto-recovery/);
});

Deno.test({
  name: "parseGatewayArgs: --help works with the env access `deno task start` grants",
  permissions: { env: ["RUST_LOG", "SMG_LOG"] },
  fn: () => {
    const { thrown, out } = shown(["--help"]);
    assert.ok(thrown instanceof HelpShown, String(thrown));
    assert.match(out, /--worker-urls/);
  },
});

Deno.test("parseGatewayArgs: --version prints the version and throws HelpShown", () => {
  const { thrown, out } = shown(["launch", "--version"], "1.2.3");
  assert.ok(thrown instanceof HelpShown, String(thrown));
  assert.equal(out.trim(), "1.2.3");
});
