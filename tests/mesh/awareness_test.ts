import assert from "node:assert/strict";
import { applyAwareness, failedProbeDelta, scaleTimeout } from "../../lib/mesh/awareness.ts";

Deno.test("awareness: the score stays within [0, max − 1] and scales timeouts by score + 1", () => {
  assert.equal(applyAwareness(0, -1, 8), 0);
  assert.equal(applyAwareness(6, 3, 8), 7);
  assert.equal(applyAwareness(3, -1, 8), 2);
  assert.equal(applyAwareness(5, 2, 1), 0, "a multiplier of 1 turns it off");
  assert.equal(scaleTimeout(500, 0), 500);
  assert.equal(scaleTimeout(500, 7), 4000);
});

Deno.test("awareness: a failed probe costs one point per missing nack, or one with nobody to ask", () => {
  assert.equal(failedProbeDelta(3, 3), 0, "every helper answered: the target is the problem");
  assert.equal(failedProbeDelta(3, 1), 2);
  assert.equal(failedProbeDelta(3, 0), 3, "nobody answered us: we are the problem");
  assert.equal(failedProbeDelta(0, 0), 1);
});
