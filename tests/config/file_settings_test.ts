/**
 * `--config FILE` as an operator uses it: every flag by its own name, lists and switches,
 * the command line winning, and each refusal (unknown key, wrong kind, out of range) naming the
 * file, the line and the key, with the closest flag for a misspelt key.
 */

import assert from "node:assert/strict";
import process from "node:process";
import {
  HelpShown,
  loadGatewayArgs,
  type ParsedArgs,
  parseGatewayCommandLine,
} from "../../lib/config/cli.ts";
import { parseConfigText } from "../../lib/config/config_file.ts";
import { defaultConfig } from "../../lib/config/config.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";

/** The settings of `yaml` (as `smg.yaml`) under the command line `args`. */
function withFile(yaml: string, args: string[] = []): ParsedArgs {
  return parseGatewayCommandLine(args, "0.0.0", parseConfigText("smg.yaml", yaml));
}

/** Asserts that `yaml` (and `args`) is refused, at parse or validation, with one line. */
function refused(yaml: string, want: RegExp, args: string[] = []): void {
  assert.throws(() => {
    const p = withFile(yaml, args);
    validateConfig(p.config, p.sources);
  }, (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, want);
    assert.ok(!e.message.includes("\n"), e.message);
    return true;
  }, yaml);
}

Deno.test("config file: each kind of flag by its own name", () => {
  const { config: c } = withFile(`
port: 8080
host: 127.0.0.1
worker-urls:
  - http://a:1
  - http://b:2
policy: round_robin
disable-retries: true
log-json: false
retry-jitter-factor: 0.5
worker-overload-waiting-requests: 7
cache-boundaries: [256, 1024]
request-id-headers: X-Trace
selector: {app: sglang, tier: gpu}
sticky-sessions: true
worker-overload-protection: true
control-plane-api-keys:
  - ops:Operations:admin:k-1
  - dash:Dashboard:user:k-2
cors-allowed-origins: [https://app.example.com]
api-key:
`);
  const d = defaultConfig();
  assert.equal(c.port, 8080);
  assert.equal(c.host, "127.0.0.1");
  assert.deepEqual(c.workerUrls, ["http://a:1", "http://b:2"]);
  assert.equal(c.policy, "round_robin");
  assert.equal(c.retry.disabled, true);
  assert.equal(c.logJson, false);
  assert.equal(c.retry.jitter, 0.5);
  assert.equal(c.loadMonitor.overloadWaitingRequests, 7);
  assert.deepEqual(c.cacheBoundaries, [256, 1024]);
  // One value where a list is taken is a list of one, read as the flag reads it.
  assert.deepEqual(c.requestIdHeaders, ["x-trace"]);
  assert.deepEqual(c.discovery.selector, { app: "sglang", tier: "gpu" });
  assert.equal(c.routingKeyOverride, true, "an alias");
  assert.equal(c.loadMonitor.overloadTokenUsage, 0.9, "a shorthand");
  assert.deepEqual(c.controlPlaneApiKeys, [
    { id: "ops", name: "Operations", role: "admin", key: "k-1" },
    { id: "dash", name: "Dashboard", role: "user", key: "k-2" },
  ]);
  assert.deepEqual(c.corsAllowedOrigins, ["https://app.example.com"]);
  assert.equal(c.apiKey, d.apiKey, "null keeps the default");
  assert.equal(c.requestTimeoutSecs, d.requestTimeoutSecs, "unset keeps the default");
});

Deno.test("config file: a shorthand gives way to its own flag, in the file too", () => {
  const { config } = withFile(
    "worker-overload-protection: true\nworker-overload-token-usage: 0.8\n",
  );
  assert.equal(config.loadMonitor.overloadTokenUsage, 0.8);
  assert.equal(
    withFile("worker-overload-protection: false\n").config.loadMonitor.overloadTokenUsage,
    null,
  );
});

Deno.test("config file: PD legs as URL, 'URL PORT' or [URL, PORT]", () => {
  const { config: c } = withFile(`
pd-disaggregation: true
prefill:
  - http://p1:1
  - http://p2:1 8998
  - [http://p3:1, none]
  - [http://p4:1, 9000]
decode: [http://d1:1, http://d2:1]
`);
  assert.deepEqual(c.pd.prefill, [
    { url: "http://p1:1", bootstrapPort: null },
    { url: "http://p2:1", bootstrapPort: 8998 },
    { url: "http://p3:1", bootstrapPort: null },
    { url: "http://p4:1", bootstrapPort: 9000 },
  ]);
  assert.deepEqual(c.pd.decode, ["http://d1:1", "http://d2:1"]);
  assert.equal(withFile("decode: http://d1:1\n").config.pd.decode[0], "http://d1:1");
  refused(
    "prefill:\n  - http://p1:1 0\n",
    /^smg\.yaml:1: prefill: invalid value '0'; bootstrap port must be 1\.\.65535 or none$/,
  );
});

Deno.test("config file: the command line wins, a list replacing the file's", () => {
  const yaml = `
port: 8080
worker-urls: [http://a:1, http://b:2]
policy: random
retry-max-retries: 3
pd-disaggregation: true
prefill: [http://p:1]
decode: [http://d:1]
`;
  const { config: c, sources } = withFile(yaml, [
    "--port",
    "9090",
    "--worker-urls",
    "http://c:3",
    "--decode",
    "http://e:5",
  ]);
  assert.equal(c.port, 9090);
  assert.deepEqual(c.workerUrls, ["http://c:3"]);
  assert.equal(c.policy, "random", "the file's, where the command line is silent");
  assert.equal(c.retry.maxAttempts, 3);
  assert.deepEqual(c.pd.prefill, [{ url: "http://p:1", bootstrapPort: null }]);
  assert.deepEqual(c.pd.decode, ["http://e:5"]);
  // What the file set, and only that, is traced to its line.
  assert.deepEqual([...sources].sort(), [
    ["--pd-disaggregation", "smg.yaml:6: pd-disaggregation"],
    ["--policy", "smg.yaml:4: policy"],
    ["--prefill", "smg.yaml:7: prefill"],
    ["--retry-max-retries", "smg.yaml:5: retry-max-retries"],
  ]);
  // A switch on the command line wins over false in the file; a shorthand over the value.
  assert.equal(
    withFile("disable-retries: false", ["--disable-retries"]).config.retry.disabled,
    true,
  );
  assert.equal(
    withFile("worker-overload-token-usage: 0.5", ["--worker-overload-protection"]).config
      .loadMonitor.overloadTokenUsage,
    0.9,
  );
});

Deno.test("config file: an unknown key is refused, naming the closest flag", () => {
  refused(
    "port: 1\nworker_urls: [http://a:1]\n",
    /^smg\.yaml:2: unknown key 'worker_urls'; did you mean 'worker-urls'\?$/,
  );
  refused("prot: 1\n", /^smg\.yaml:1: unknown key 'prot'; did you mean 'port'\?$/);
  refused("--port: 1\n", /^smg\.yaml:1: unknown key '--port'; did you mean 'port'\?$/);
  refused("cb-failure-treshold: 1\n", /did you mean 'cb-failure-threshold'\?$/);
  refused("sticky-session: true\n", /did you mean 'sticky-sessions'\?$/);
  refused(
    "\n\nsomething-else-entirely: 1\n",
    /^smg\.yaml:3: unknown key 'something-else-entirely' \(keys are flag names without --; see smg --help\)$/,
  );
  refused(
    "config: other.yaml\n",
    /^smg\.yaml:1: config: a config file cannot name another config file$/,
  );
});

Deno.test("config file: a value of the wrong kind is refused with file, line and key", () => {
  refused("host: a\nport: abc\n", /^smg\.yaml:2: port: invalid value 'abc'; expected an integer$/);
  refused("port: [1, 2]\n", /^smg\.yaml:1: port: expected one value, not a list$/);
  refused("host: {a: b}\n", /^smg\.yaml:1: host: expected one value, not a mapping$/);
  refused(
    "disable-retries: yes\n",
    /^smg\.yaml:1: disable-retries: expected true or false, not 'yes'$/,
  );
  refused(
    "disable-retries: 1\n",
    /^smg\.yaml:1: disable-retries: expected true or false, not '1'$/,
  );
  refused("worker-overload-protection: on\n", /expected true or false, not 'on'$/);
  refused(
    "worker-urls: [[http://a:1]]\n",
    /^smg\.yaml:1: worker-urls: expected a list of plain values, not a list$/,
  );
  refused("policy: fastest\n", /^smg\.yaml:1: policy: invalid value 'fastest'; allowed: random, /);
  refused("cache-boundaries: [256, x]\n", /^smg\.yaml:1: cache-boundaries: invalid value '256,x'/);
  refused("selector: [novalue]\n", /^smg\.yaml:1: selector: invalid value 'novalue'/);
  refused(
    "sticky-sessions: true\nrouting-key-override: false\n",
    /^smg\.yaml:2: routing-key-override: sets what 'sticky-sessions' \(line 1\) already sets; keep one$/,
  );
});

Deno.test("config file: start-up checks of a file's value point at its line", () => {
  refused(
    "host: a\n\nport: 70000\n",
    /^smg\.yaml:3: port: invalid value '70000'; allowed: 0\.\.65535/,
  );
  refused(
    "worker-urls:\n  - http://a:1\n  - ftp://b\n",
    /^smg\.yaml:1: worker-urls: invalid value 'ftp:\/\/b'/,
  );
  refused(
    "retry-jitter-factor: 2\n",
    /^smg\.yaml:1: retry-jitter-factor: invalid value '2'; allowed: 0\.\.1$/,
  );
  refused(
    "queue-size: 5\nqueue-timeout-secs: 0\n",
    /^smg\.yaml:2: queue-timeout-secs: invalid value '0'/,
  );
  refused(
    "cors-allowed-origins: [https://a.example/path]\n",
    /^smg\.yaml:1: cors-allowed-origins: invalid value/,
  );
  // Given on the command line, the same value is the flag's problem.
  refused("port: 1\n", /^--port: invalid value '70000'/, ["--port", "70000"]);
});

/** A temporary config file holding `text`, removed after `fn`. */
async function withTempFile(
  ext: string,
  text: string,
  fn: (path: string) => Promise<void>,
): Promise<void> {
  const path = await Deno.makeTempFile({ suffix: ext });
  try {
    await Deno.writeTextFile(path, text);
    await fn(path);
  } finally {
    await Deno.remove(path);
  }
}

Deno.test("--config: read from disk, YAML or JSON, spelt either way", async () => {
  await withTempFile(".yaml", "port: 8080\nworker-urls: [http://a:1]\n", async (path) => {
    for (const args of [["--config", path], [`--config=${path}`], ["launch", "--config", path]]) {
      const { config } = await loadGatewayArgs(args);
      assert.equal(config.port, 8080, args.join(" "));
      assert.deepEqual(config.workerUrls, ["http://a:1"]);
    }
  });
  await withTempFile(".json", '{"port": 8081, "disable-retries": true}', async (path) => {
    const { config } = await loadGatewayArgs(["--port", "9", "--config", path]);
    assert.equal(config.port, 9);
    assert.equal(config.retry.disabled, true);
  });
});

Deno.test("--config: refused without a file, twice, or missing; --help does not read it", async () => {
  const rejects = (args: string[], want: RegExp) =>
    assert.rejects(loadGatewayArgs(args), (e) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.match(e.message, want);
      return true;
    }, args.join(" "));
  await rejects(["--config"], /^--config: a file is required$/);
  await rejects(["--config", "--port", "1"], /^--config: a file is required$/);
  await rejects(["--config", "a.yaml", "--config", "b.yaml"], /^--config: given twice/);
  await rejects(
    ["--config", "/tmp/smg-no-such.yaml"],
    /^--config \/tmp\/smg-no-such\.yaml: no such file$/,
  );
  // --help does not need the file (it is not read at all).
  const original = process.stdout.write;
  let help = "";
  process.stdout.write = ((chunk: string) => (help += chunk, true)) as typeof original;
  try {
    await assert.rejects(
      loadGatewayArgs(["--config", "/tmp/smg-no-such.yaml", "--help"]),
      HelpShown,
    );
  } finally {
    process.stdout.write = original;
  }
  assert.match(help, /--config <file> +read flags from a YAML or JSON file; flags given here win/);
});

Deno.test("an unknown command-line flag names the closest one", () => {
  assert.throws(() => parseGatewayCommandLine(["--prot", "1"]), (e) => {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.message, "--prot: unknown flag; did you mean --port? (see smg --help)");
    return true;
  });
  assert.throws(() => parseGatewayCommandLine(["--zzzzzzzzzz"]), {
    message: "--zzzzzzzzzz: unknown flag (see smg --help)",
  });
});
