import assert from "node:assert/strict";
import { compareNames, isLive } from "../../lib/mesh/member.ts";

Deno.test("member: names compare in UTF-8 byte order, as SMG's Rust strings do", () => {
  assert.ok(compareNames("a", "b") < 0);
  assert.ok(compareNames("b", "a") > 0);
  assert.equal(compareNames("a", "a"), 0);
  assert.ok(compareNames("a", "ab") < 0);
  assert.ok(compareNames("B", "a") < 0, "upper case sorts first in bytes");
  // U+FF5E (3 UTF-8 bytes, EF BD 9E) sorts before U+1F600 (4 bytes, F0 ...) in bytes, but after it
  // in UTF-16 code units (FF5E > D83D).
  assert.ok(compareNames("\uFF5E", "\u{1F600}") < 0);
  assert.ok("\uFF5E" > "\u{1F600}");
});

Deno.test("member: ALIVE and SUSPECTED members are live, the rest are not", () => {
  assert.deepEqual(
    (["INIT", "ALIVE", "SUSPECTED", "DOWN", "LEAVING"] as const).map(isLive),
    [false, true, true, false, false],
  );
});
