/**
 * One table says what a worker's answer means for the request (retried elsewhere or not) and for
 * the worker (its breaker), and the HTTP API page shows that table as it is.
 */

import assert from "node:assert/strict";
import type { Outcome } from "../../lib/workers/circuit_breaker.ts";
import {
  type AttemptEnd,
  classifyStatus,
  FAILURES_BEGIN,
  FAILURES_END,
  isRetryableStatus,
  renderFailureTable,
} from "../../lib/workers/failures.ts";

Deno.test("failures: 408, 429 and 500/502/503/504 are retried, nothing else", () => {
  for (const s of [408, 429, 500, 502, 503, 504]) assert.equal(isRetryableStatus(s), true, `${s}`);
  for (const s of [200, 201, 204, 301, 400, 401, 403, 404, 413, 422, 499, 501, 505]) {
    assert.equal(isRetryableStatus(s), false, `${s}`);
  }
});

Deno.test("failures: which worker answers count against it on its breaker", () => {
  const table: [AttemptEnd, Outcome][] = [
    ["transport", "failure"],
    ["timeout", "failure"],
    [500, "failure"],
    [501, "failure"],
    [502, "failure"],
    [503, "failure"],
    [504, "failure"],
    [505, "failure"],
    [429, "neutral"],
    [408, "neutral"],
    [200, "success"],
    [204, "success"],
    [400, "success"],
    [401, "success"],
    [404, "success"],
    [422, "success"],
  ];
  for (const [end, want] of table) assert.equal(classifyStatus(end), want, `${end}`);
});

Deno.test("failures: docs/http-api.md shows the table the code classifies by", async () => {
  const page = await Deno.readTextFile(new URL("../../docs/http-api.md", import.meta.url));
  const begin = page.indexOf(FAILURES_BEGIN);
  const end = page.indexOf(FAILURES_END);
  assert.ok(begin >= 0 && end > begin, "docs/http-api.md has the failures:begin/end lines");
  assert.ok(
    page.slice(begin, end + FAILURES_END.length) === renderFailureTable(),
    "docs/http-api.md's table of worker failures differs from lib/workers/failures.ts: run `deno task docs`",
  );
});
