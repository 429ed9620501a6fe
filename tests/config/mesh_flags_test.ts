import assert from "node:assert/strict";
import { check, refused } from "../support/config.ts";

const base = ["--enable-mesh", "--mesh-advertise-host", "127.0.0.1"];

Deno.test("mesh flags: SMG's names and defaults", () => {
  const m = check([]).mesh;
  assert.equal(m.enabled, false);
  assert.equal(m.host, "0.0.0.0");
  assert.equal(m.port, 39527);
  assert.deepEqual(m.peerUrls, []);
  assert.equal(m.serverName, null);
  assert.equal(m.probeIntervalMs, 1000);
  const c = check([
    ...base,
    "--mesh-server-name",
    "b",
    "--mesh-port",
    "39528",
    "--mesh-peer-urls",
    "127.0.0.1:39527",
    "router-0.smg-mesh:39527",
    "[::1]:39529",
  ]).mesh;
  assert.equal(c.serverName, "b");
  assert.equal(c.port, 39528);
  assert.deepEqual(c.peerUrls, ["127.0.0.1:39527", "router-0.smg-mesh:39527", "[::1]:39529"]);
});

Deno.test("mesh flags: SMG's start-up checks, one line each", () => {
  refused(["--enable-mesh"], /--mesh-advertise-host: mesh advertise address cannot be unspecified/);
  refused(["--enable-mesh", "--mesh-advertise-host", "::"], /cannot be unspecified/);
  refused([...base, "--mesh-server-name", "a:b"], /--mesh-server-name: .*must not contain ':'/);
  refused([...base, "--mesh-server-name", ""], /--mesh-server-name: .*non-empty/);
  refused([...base, "--mesh-peer-urls", "http://10.0.0.1:39527"], /--mesh-peer-urls: .*host:port/);
  refused([...base, "--mesh-peer-urls", "10.0.0.1"], /--mesh-peer-urls/);
  refused([...base, "--mesh-peer-urls", "10.0.0.1:99999"], /--mesh-peer-urls/);
  refused([...base, "--mesh-port", "0"], /--mesh-port/);
  refused([...base, "--mesh-tls-cert", "/x.pem"], /give all three/);
  refused([...base, "--mesh-probe-timeout-ms", "1000"], /--mesh-probe-timeout-ms: .*below/);
  refused([...base, "--mesh-stream-idle-timeout-secs", "10"], /above --mesh-heartbeat-secs/);
  refused([...base, "--mesh-indirect-checks", "-1"], /--mesh-indirect-checks/);
  // Off, the mesh flags are not checked (as SMG).
  check(["--mesh-server-name", "a:b"]);
});

Deno.test("mesh flags: a raw IPv6 address (an IPv6 pod's IP) is taken in brackets", () => {
  const m = check(["--enable-mesh", "--mesh-host", "::", "--mesh-advertise-host", "fd00::7"]).mesh;
  assert.equal(m.advertiseHost, "[fd00::7]");
  assert.equal(m.host, "[::]");
});
