/** "Did you mean": edit distance, and the closest flag within a third of its length. */

import assert from "node:assert/strict";
import { closest, editDistance } from "../../lib/config/suggest.ts";

Deno.test("editDistance: insertions, deletions and substitutions", () => {
  const cases: [string, string, number][] = [
    ["", "", 0],
    ["port", "port", 0],
    ["prot", "port", 2],
    ["port", "ports", 1],
    ["ports", "port", 1],
    ["kitten", "sitting", 3],
    ["", "abc", 3],
  ];
  for (const [a, b, d] of cases) assert.equal(editDistance(a, b), d, `${a} ${b}`);
});

Deno.test("closest: the nearest name, spelling variants read as flags, nothing when far", () => {
  const names = ["port", "host", "worker-urls", "cb-failure-threshold", "cb-success-threshold"];
  assert.equal(closest("prot", names), "port");
  assert.equal(closest("worker_urls", names), "worker-urls");
  assert.equal(closest("Worker-URLs", names), "worker-urls");
  assert.equal(closest("--host", names), "host");
  assert.equal(closest("cb-failure-treshold", names), "cb-failure-threshold");
  assert.equal(closest("completely-unrelated", names), null);
  assert.equal(closest("x", []), null);
});
