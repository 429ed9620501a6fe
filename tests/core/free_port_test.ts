import assert from "node:assert/strict";
import { freePort, freePorts } from "../../lib/core/free_port.ts";

Deno.test("freePorts: n distinct ports, each free to bind again", () => {
  const ports = freePorts(5);
  assert.equal(new Set(ports).size, 5);
  for (const port of ports) Deno.listen({ hostname: "127.0.0.1", port }).close();
});

Deno.test("freePort: a port on the host asked for, free to bind again", () => {
  const port = freePort("127.0.0.1");
  assert.ok(port > 0 && port < 65536);
  Deno.listen({ hostname: "127.0.0.1", port }).close();
});
