/** Engine endpoints: `tcp://host:port` as the gateway dials it; what cannot be dialled is refused. */

import assert from "node:assert/strict";
import { parseZmqEndpoint } from "../../lib/kv/endpoint.ts";

Deno.test("endpoint: tcp://host:port, IPv6 in brackets", () => {
  assert.deepEqual(parseZmqEndpoint("tcp://10.0.0.7:5557"), { hostname: "10.0.0.7", port: 5557 });
  assert.deepEqual(parseZmqEndpoint("tcp://worker-0.svc:5558"), {
    hostname: "worker-0.svc",
    port: 5558,
  });
  assert.deepEqual(parseZmqEndpoint("tcp://[::1]:5557"), { hostname: "::1", port: 5557 });
});

Deno.test("endpoint: bind addresses, other transports and bad ports are refused by name", () => {
  const cases: [string, RegExp][] = [
    ["tcp://*:5557", /"tcp:\/\/\*:5557" is the engine's bind address/],
    ["ipc:///tmp/kv", /"ipc:\/\/\/tmp\/kv" is not tcp:\/\/host:port/],
    ["inproc://kv", /is not tcp:\/\/host:port/],
    ["10.0.0.7:5557", /is not tcp:\/\/host:port/],
    ["tcp://host:0", /has no valid host:port/],
    ["tcp://host:99999", /has no valid host:port/],
    ["tcp://host", /has no valid host:port/],
  ];
  for (const [endpoint, message] of cases) {
    assert.throws(() => parseZmqEndpoint(endpoint), (e: Error & { code: string }) => {
      assert.equal(e.code, "bad_endpoint", endpoint);
      assert.match(e.message, message, endpoint);
      return true;
    });
  }
});
