/**
 * What the attempt span says of its worker's address (`server.address`, `server.port`): the host
 * and port of every kind of worker URL the registry holds.
 */

import assert from "node:assert/strict";
import { addressOf } from "../../lib/proxy/trace.ts";

Deno.test("trace: a worker URL's host and port, whatever its form", () => {
  assert.deepEqual(addressOf("http://10.0.0.5:8000"), { host: "10.0.0.5", port: 8000 });
  assert.deepEqual(addressOf("https://w.example/v1"), { host: "w.example", port: null });
  assert.deepEqual(addressOf("grpc://[::1]:30001"), { host: "::1", port: 30001 });
  assert.deepEqual(addressOf("http://[fd00::2]"), { host: "fd00::2", port: null });
  assert.deepEqual(addressOf("http://127.0.0.1:30000@2"), { host: "127.0.0.1", port: 30000 });
  assert.equal(addressOf("http://10.0.0.5:8000"), addressOf("http://10.0.0.5:8000"), "parsed once");
});
