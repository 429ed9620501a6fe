/**
 * The runtime net grant per mode: static workers and PD legs narrow it to the listen sockets,
 * the workers and the allow-list; discovery or the mesh without an allow-list keep the
 * process's grant (saying why); with one they add the seeds and the Kubernetes API server; an
 * allow-list entry Deno cannot spell keeps the process's grant too; `Deno.serve` behind HTTPS
 * adds the loopback address its pipe reaches it on.
 */

import assert from "node:assert/strict";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { gatewayNetGrant, grantEntry } from "../../lib/server/net_grant.ts";

const config = (args: string[]) => validateConfig(parseGatewayArgs(args));
const LISTEN = ["--host", "0.0.0.0", "--port", "30000", "--prometheus-host", "127.0.0.1"];

Deno.test("net grant: static workers narrow it to the listen sockets and the workers", () => {
  const g = gatewayNetGrant(config([
    ...LISTEN,
    "--worker-urls",
    "http://10.0.0.1:8000",
    "https://worker.example",
    "http://[fd00::5]:30001",
  ]));
  assert.deepEqual(g, {
    mode: "narrow",
    allow: [
      "0.0.0.0:30000",
      "127.0.0.1:29000",
      "10.0.0.1:8000",
      "worker.example:443",
      "[fd00::5]:30001",
    ],
  });
});

Deno.test("net grant: PD legs and the allow-list join the static grant", () => {
  const g = gatewayNetGrant(config([
    ...LISTEN,
    "--pd-disaggregation",
    "--prefill",
    "http://10.0.0.1:8000",
    "9000",
    "--decode",
    "http://10.0.0.2:8000",
    "--worker-host-allowlist",
    "10.0.0.0/8",
    "*.svc.cluster.local",
    "[fd00::7]",
  ]));
  assert.deepEqual(g, {
    mode: "narrow",
    allow: [
      "0.0.0.0:30000",
      "127.0.0.1:29000",
      "10.0.0.1:8000",
      "10.0.0.2:8000",
      "10.0.0.0/8",
      "*.svc.cluster.local",
      "[fd00::7]",
    ],
  });
});

Deno.test("net grant: discovery or the mesh without an allow-list keep the process's grant", () => {
  const mesh = gatewayNetGrant(config([...LISTEN, "--enable-mesh", "--mesh-host", "10.0.0.9"]));
  assert.equal(mesh.mode, "inherit");
  assert.match(mesh.mode === "inherit" ? mesh.why : "", /--enable-mesh register workers/);
  const disc = gatewayNetGrant(config([...LISTEN, "--service-discovery", "--selector", "a=b"]));
  assert.equal(disc.mode, "inherit");
});

Deno.test("net grant: with an allow-list, the mesh seeds and the Kubernetes API are added", () => {
  const args = [
    ...LISTEN,
    "--enable-mesh",
    "--mesh-host",
    "10.0.0.9",
    "--mesh-peer-urls",
    "10.0.0.10:39527",
    "--service-discovery",
    "--selector",
    "app=sglang",
    "--worker-host-allowlist",
    "10.0.0.0/16",
  ];
  assert.deepEqual(gatewayNetGrant(config(args), () => "10.96.0.1:443"), {
    mode: "narrow",
    allow: [
      "0.0.0.0:30000",
      "127.0.0.1:29000",
      "10.0.0.9:39527",
      "10.0.0.10:39527",
      "10.0.0.0/16",
      "10.96.0.1:443",
    ],
  });
  const unknownApi = gatewayNetGrant(config(args), () => null);
  assert.equal(unknownApi.mode, "inherit");
  assert.match(unknownApi.mode === "inherit" ? unknownApi.why : "", /Kubernetes API server/);
});

Deno.test("net grant: an IPv6 block Deno cannot express keeps the process's grant", () => {
  assert.equal(grantEntry("fd00::/8"), null);
  assert.equal(grantEntry("fd00::1"), "[fd00::1]");
  assert.equal(grantEntry("10.0.0.0/8"), "10.0.0.0/8");
  const g = gatewayNetGrant(config([...LISTEN, "--worker-host-allowlist", "fd00::/8"]));
  assert.equal(g.mode, "inherit");
  assert.match(g.mode === "inherit" ? g.why : "", /cannot express .* fd00::\/8/);
});

Deno.test("net grant: Deno.serve behind HTTPS adds loopback at any port, the own front nothing", () => {
  const tls = ["--tls-cert-path", "/etc/smg/tls.crt", "--tls-key-path", "/etc/smg/tls.key"];
  const worker = ["--worker-urls", "http://10.0.0.1:8000"];
  const base = ["0.0.0.0:30000", "127.0.0.1:29000"];
  assert.deepEqual(
    gatewayNetGrant(config([...LISTEN, ...worker, ...tls, "--http-server", "deno"])),
    {
      mode: "narrow",
      allow: [...base, "127.0.0.1", "10.0.0.1:8000"],
    },
  );
  assert.deepEqual(
    gatewayNetGrant(config([...LISTEN, ...worker, ...tls, "--http-server", "own"])),
    {
      mode: "narrow",
      allow: [...base, "10.0.0.1:8000"],
    },
  );
  assert.deepEqual(gatewayNetGrant(config([...LISTEN, ...worker, "--http-server", "deno"])), {
    mode: "narrow",
    allow: [...base, "10.0.0.1:8000"],
  });
});
