/**
 * The status page's recent slow requests: the ten slowest of the last five minutes, slowest
 * first; a faster one does not displace them, an old one leaves; none listed without tracing.
 */

import assert from "node:assert/strict";
import { SLOW_KEPT, SLOW_WINDOW_MS, SlowRequests } from "../../lib/dashboard/slow.ts";

const req = (ms: number) => ({
  traceId: `t${ms}`,
  requestId: `r${ms}`,
  route: "POST /v1/chat/completions",
  status: 200,
  ms,
});

Deno.test("slow requests: the slowest kept, slowest first, for five minutes", () => {
  const s = new SlowRequests();
  for (let i = 1; i <= 30; i++) s.add(req(i * 10), 0);
  const list = s.list(0);
  assert.equal(list.length, SLOW_KEPT);
  assert.deepEqual(list.map((e) => e.ms), [300, 290, 280, 270, 260, 250, 240, 230, 220, 210]);
  assert.equal(s.wouldKeep(5, 1000), false);
  assert.equal(s.wouldKeep(211, 1000), true);
  assert.equal(s.wouldKeep(5, SLOW_WINDOW_MS + 1), true, "the slowest ones have aged out");
  s.add(req(5), 1000); // faster than every listed one
  assert.equal(s.list(1000).at(-1)!.ms, 210);
  s.add(req(1000), 2000);
  assert.equal(s.list(2000)[0].traceId, "t1000");
  // Past the window, only the one that ended later stays.
  assert.deepEqual(s.list(SLOW_WINDOW_MS + 1000).map((e) => e.ms), [1000]);
  assert.deepEqual(s.list(SLOW_WINDOW_MS + 2001), []);
});
