import assert from "node:assert/strict";
import { isUnspecified, parseHostPort } from "../../lib/core/host_port.ts";

Deno.test("host_port: host:port parsing and the unspecified address", () => {
  assert.deepEqual(parseHostPort("10.0.0.1:39527"), { host: "10.0.0.1", port: 39527 });
  assert.deepEqual(parseHostPort("[fe80::1]:1"), { host: "[fe80::1]", port: 1 });
  assert.equal(parseHostPort("a:b"), null);
  assert.equal(parseHostPort(":1"), null);
  for (const u of ["0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0"]) assert.ok(isUnspecified(u), u);
  for (const u of ["127.0.0.1", "::1", "host"]) assert.ok(!isUnspecified(u), u);
});
