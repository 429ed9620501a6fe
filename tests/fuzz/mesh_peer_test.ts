/**
 * The mesh-port fuzzer, a bounded seeded run (`support/fuzz/mesh_peer.ts` for the inputs
 * and oracles; `deno task bench:fuzz` runs it long), and its store oracle shown able to fail.
 */

import assert from "node:assert/strict";
import { formatReport, runFamily } from "../../support/fuzz/driver.ts";
import { meshFamily, meshPeer } from "../../support/fuzz/mesh_peer.ts";

Deno.test("fuzz mesh: malformed frames and messages from a peer change no store entry and stop nothing", async () => {
  const r = await runFamily(meshPeer, { seed: 20260, inputs: 2500 });
  assert.equal(r.violations.length, 0, formatReport(r));
  assert.equal(r.inputs, 2500);
  assert.ok((r.histogram.get("stream fenced OK") ?? 0) > 0, formatReport(r));
});

Deno.test("fuzz mesh: a store change no message may make is reported", async () => {
  // The same inputs with nothing excused: the well-formed batches' changes must be caught.
  const r = await runFamily(meshFamily(false), { seed: 20260, inputs: 1500, maxViolations: 1 });
  assert.match(r.violations[0]?.detail ?? "none", /remote change of .* no valid message named/);
});
