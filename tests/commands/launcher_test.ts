/**
 * What the launcher computes before it starts the command's thread: the gateway's grant, `serve`
 * adding the host its workers listen on, `sim-worker` its listen host only, and nothing for
 * --help or bad flags (the command reports those itself, in one line).
 */

import assert from "node:assert/strict";
import { describeGrant, netGrantFor } from "../../lib/commands/launcher.ts";

Deno.test("launcher: each command's grant", () => {
  assert.deepEqual(
    netGrantFor(["--port", "8000", "--worker-urls", "http://10.0.0.1:8000"])?.grant,
    { mode: "narrow", allow: ["0.0.0.0:8000", "0.0.0.0:29000", "10.0.0.1:8000"] },
  );
  assert.deepEqual(
    netGrantFor(["serve", "--backend", "sim", "--worker-host", "127.0.0.5"])?.grant,
    { mode: "narrow", allow: ["127.0.0.1:8080", "0.0.0.0:29000", "127.0.0.5"] },
  );
  assert.deepEqual(
    netGrantFor(["sim-worker", "--host", "::1", "--port", "0"])?.grant,
    { mode: "narrow", allow: ["[::1]"] },
  );
  assert.equal(
    netGrantFor([
      "serve",
      "--backend",
      "sim",
      "--router-enable-mesh",
      "--router-mesh-host",
      "10.0.0.1",
    ])?.grant.mode,
    "inherit",
  );
});

Deno.test("launcher: --help and bad flags compute nothing", () => {
  assert.equal(netGrantFor(["--help"]), null);
  assert.equal(netGrantFor(["--port", "x"]), null);
  assert.equal(netGrantFor(["--worker-urls", "http://169.254.169.254"]), null);
  assert.equal(netGrantFor(["sim-worker", "--help"]), null);
});

Deno.test("launcher: the grant as the start-up line shows it", () => {
  assert.equal(describeGrant({ mode: "narrow", allow: ["a:1", "b"] }), "narrow: a:1,b");
  assert.equal(describeGrant({ mode: "inherit", why: "because" }), "process: because");
});
