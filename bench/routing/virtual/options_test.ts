/**
 * `bench:virtual`'s command line: the defaults follow `bench:routing`'s trace cells and the
 * scenario's fleet; bad flags are refused with a `UsageError`.
 */

import assert from "node:assert/strict";
import { parseVirtualOptions, UsageError } from "./options.ts";

Deno.test("virtual options: bench:routing's trace defaults, the scenario's fleet", () => {
  const d = parseVirtualOptions([]);
  assert.ok(d !== "help");
  assert.deepEqual(
    [d.trace, d.scenario, d.workers, d.speed, d.warmup, d.duration, d.drain, d.targets],
    ["conversation", "trace", 8, 2.5, 400, 10, 15, ["ref:affinity", "round_robin", "cache_aware"]],
  );
  const o = parseVirtualOptions([
    "--",
    "--scenario",
    "trace-small-kv",
    "--chars-per-token=8",
    "--requests",
    "100",
    "--time-scale",
    "1",
    "--target",
    "cache_aware:--cache-boundaries 2,4",
  ]);
  assert.ok(o !== "help");
  assert.deepEqual(o.simArgs, [
    "--kv-tokens",
    "262144",
    "--prefill-tps",
    "48000",
    "--time-scale",
    "1",
    "--chars-per-token",
    "8",
  ]);
  assert.equal(o.duration, Infinity);
  assert.deepEqual(o.targets, ["cache_aware:--cache-boundaries 2,4"]);
  assert.equal(parseVirtualOptions(["--help"]), "help");
  assert.throws(() => parseVirtualOptions(["--repeats", "3"]), UsageError);
  assert.throws(() => parseVirtualOptions(["--sim", "--chars-per-token 4"]), UsageError);
  assert.throws(() => parseVirtualOptions(["--speed", "0"]), UsageError);
});
