/**
 * The gateway says it listens only once SIGTERM drains it: a process that signals itself at the
 * "smg listening" line exits 0 (before, the line came before the listener and the signal's
 * default action killed it, 143).
 */

import assert from "node:assert/strict";

Deno.test("listen: SIGTERM sent at the 'smg listening' line drains the gateway, exit 0", async () => {
  const script = new URL("../support/sigterm_at_listen.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-no-legacy-abort",
      "--allow-net=127.0.0.1",
      "--allow-env",
      "--allow-read",
      script,
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(30_000),
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `exit ${out.code} (signal ${out.signal}): ${err.slice(-2000)}`);
});
