/**
 * The composition root's feature list: which optional parts a configuration runs, in start
 * order, and that a gateway built, started and stopped on fake time leaves nothing running.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { Gateway } from "../../lib/server/app.ts";
import { check } from "../support/config.ts";
import { tracingSettings } from "../../lib/tracing/settings.ts";
import { CapturingTransport } from "../support/otlp.ts";

/** The features of a gateway built from `args` (then stopped: it holds a pool toward workers). */
async function features(args: string[]): Promise<string[]> {
  const config = check(args);
  const settings = tracingSettings(config.tracing, () => undefined);
  const gw = new Gateway({
    config,
    log: silentLogger,
    clock: new FakeClock(),
    tracing: settings && { settings, transport: new CapturingTransport() },
  });
  const names = gw.features;
  await gw.stop();
  return names;
}

Deno.test("features: the loops and the status page always; KV events only where asked", async () => {
  assert.deepEqual(await features(["--kv-events", "off"]), ["health", "loads", "dashboard"]);
  assert.deepEqual(await features([]), ["health", "loads", "dashboard", "kv_events"]);
});

Deno.test("features: the mesh comes after the status page and before KV events in the list", async () => {
  const mesh = ["--enable-mesh", "--mesh-host", "127.0.0.1", "--mesh-port", "1"];
  assert.deepEqual(await features(mesh), ["health", "loads", "dashboard", "mesh", "kv_events"]);
});

Deno.test("features: tracing comes first, so it is stopped last (the drained requests' spans)", async () => {
  assert.deepEqual(await features(["--enable-trace", "--kv-events", "off"]), [
    "tracing",
    "health",
    "loads",
    "dashboard",
  ]);
});

Deno.test("features: started and stopped on fake time, a gateway leaves no timer behind", async () => {
  const clock = new FakeClock();
  const gw = new Gateway({ config: check([]), log: silentLogger, clock });
  await gw.start();
  assert.ok(clock.pending > 0, "the loops wait on the clock");
  await gw.stop();
  assert.equal(clock.pending, 0);
});

Deno.test("features: docs/architecture.md's table names every feature a gateway can run", async () => {
  const page = await Deno.readTextFile(new URL("../../docs/architecture.md", import.meta.url));
  const documented = [...page.matchAll(/^\| `([a-z_]+)` +\|/gm)].map((m) => m[1]);
  const everything = await features([
    "--enable-mesh",
    "--mesh-host",
    "127.0.0.1",
    "--mesh-port",
    "1",
    "--service-discovery",
    "--selector",
    "app=sglang",
    "--enable-trace",
  ]);
  // The client certificate's reload needs its files read (loadTls): its place is after tracing.
  assert.deepEqual(documented, [everything[0], "worker_tls", ...everything.slice(1)]);
});
