/**
 * `--worker-host-allowlist` on the command line (repeated, space- and comma-separated, a bad
 * entry failing start naming it) and the start-up workers checked against the egress policy:
 * `--worker-urls`, `--prefill`, `--decode`, each refusal naming its flag.
 */

import assert from "node:assert/strict";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";

const start = (args: string[]) => validateConfig(parseGatewayArgs(args));

function refused(args: string[], want: RegExp): void {
  assert.throws(() => start(args), (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, want);
    assert.ok(!e.message.includes("\n"), "one line");
    return true;
  }, args.join(" "));
}

Deno.test("--worker-host-allowlist: repeated, space- and comma-separated entries add up", () => {
  const c = start([
    "--worker-host-allowlist",
    "10.0.0.0/8",
    "*.svc.cluster.local",
    "--worker-host-allowlist",
    "fd00::/8,worker-0.example",
  ]);
  assert.deepEqual(c.workerHostAllowlist, [
    "10.0.0.0/8",
    "*.svc.cluster.local",
    "fd00::/8",
    "worker-0.example",
  ]);
  assert.deepEqual(start([]).workerHostAllowlist, []);
});

Deno.test("--worker-host-allowlist: a malformed entry fails start naming it", () => {
  refused(
    ["--worker-host-allowlist", "10.0.0.0/8", "10.0.0.1/8"],
    /^--worker-host-allowlist: invalid value '10\.0\.0\.1\/8'; expected an IP address, a CIDR/,
  );
  refused(["--worker-host-allowlist", "http://10.0.0.1"], /invalid value 'http:\/\/10\.0\.0\.1'/);
});

Deno.test("start-up workers: outside the allow-list, each flag names itself", () => {
  const allow = ["--worker-host-allowlist", "10.0.0.0/8"];
  start([...allow, "--worker-urls", "http://10.0.0.1:8000"]);
  refused(
    [...allow, "--worker-urls", "http://10.0.0.1:8000", "http://172.16.0.1:8000"],
    /^--worker-urls: invalid value 'http:\/\/172\.16\.0\.1:8000'; refused: 172\.16\.0\.1:8000 is not in --worker-host-allowlist \(10\.0\.0\.0\/8\)/,
  );
  const pd = ["--pd-disaggregation", "--prefill", "http://10.0.0.1:8000", "9000"];
  start([...allow, ...pd, "--decode", "http://10.0.0.2:8000"]);
  refused(
    [
      ...allow,
      "--pd-disaggregation",
      "--prefill",
      "http://172.16.0.1:8000",
      "--decode",
      "http://10.0.0.2:8000",
    ],
    /^--prefill: invalid value 'http:\/\/172\.16\.0\.1:8000'; refused: .*not in --worker-host-allowlist/,
  );
  refused(
    [...allow, ...pd, "--decode", "http://worker.example:8000"],
    /^--decode: .*must be listed by name/,
  );
});

Deno.test("start-up workers: link-local and the gateway's own ports refused without the flag", () => {
  refused(["--worker-urls", "http://169.254.169.254"], /^--worker-urls: .*is link-local/);
  refused(
    ["--pd-disaggregation", "--prefill", "http://[fe80::1]:8000", "--decode", "http://10.0.0.2:80"],
    /^--prefill: .*is link-local/,
  );
  refused(
    ["--port", "8080", "--worker-urls", "http://127.0.0.1:8080"],
    /^--worker-urls: .*127\.0\.0\.1:8080 is this gateway's own main port/,
  );
  refused(
    ["--prometheus-port", "9100", "--worker-urls", "http://localhost:9100"],
    /own metrics port/,
  );
  refused(
    [
      "--enable-mesh",
      "--mesh-host",
      "127.0.0.1",
      "--mesh-port",
      "39600",
      "--worker-urls",
      "http://127.0.0.1:39600",
    ],
    /own mesh port/,
  );
  start(["--port", "8080", "--worker-urls", "http://127.0.0.1:8081"]);
});
