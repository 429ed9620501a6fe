/**
 * How gateway errors reach clients: SMG's envelope with `X-SMG-Error-Code`, `Retry-After` and
 * `x-request-id` when known, the flat worker-API body, and one-line config errors.
 */

import assert from "node:assert/strict";
import {
  badValue,
  ConfigError,
  errorResponse,
  flatErrorResponse,
  GatewayError,
  invalidRequest,
} from "../../lib/core/errors.ts";

Deno.test("errorResponse: SMG's envelope, status and X-SMG-Error-Code", async () => {
  const err = new GatewayError(503, "no_available_workers", "no worker serves model 'm'");
  const res = errorResponse(err);
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.equal(res.headers.get("x-smg-error-code"), "no_available_workers");
  assert.equal(res.headers.get("retry-after"), null);
  assert.equal(res.headers.get("x-request-id"), null);
  assert.deepEqual(await res.json(), {
    error: {
      message: "no worker serves model 'm'",
      type: "Service Unavailable",
      code: "no_available_workers",
      param: null,
    },
  });
});

Deno.test("errorResponse: Retry-After when the error sets it, x-request-id when given", () => {
  const err = new GatewayError(429, "admission_queue_full", "full", { retryAfter: 2 });
  const res = errorResponse(err, "req-123");
  assert.equal(res.headers.get("retry-after"), "2");
  assert.equal(res.headers.get("x-request-id"), "req-123");
  assert.equal(
    errorResponse(new GatewayError(503, "x", "y", { retryAfter: 0 })).headers.get("retry-after"),
    "0",
    "zero seconds is still a Retry-After",
  );
});

Deno.test("GatewayError: type is the reason phrase by default", () => {
  const table: [number, string][] = [
    [400, "Bad Request"],
    [404, "Not Found"],
    [408, "Request Timeout"],
    [413, "Payload Too Large"],
    [429, "Too Many Requests"],
    [500, "Internal Server Error"],
    [502, "Bad Gateway"],
    [503, "Service Unavailable"],
    [504, "Gateway Timeout"],
    [499, "Error"],
  ];
  for (const [status, type] of table) {
    assert.equal(new GatewayError(status, "c", "m").type, type, String(status));
  }
  assert.equal(new GatewayError(400, "c", "m", { type: "custom" }).type, "custom");
});

Deno.test("invalidRequest: a 400 of type invalid_request_error naming the field", async () => {
  const err = invalidRequest("'messages' must be an array", "messages");
  assert.ok(err instanceof GatewayError);
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_request");
  const res = errorResponse(err, "r");
  assert.equal(res.status, 400);
  assert.deepEqual(await res.json(), {
    error: {
      message: "'messages' must be an array",
      type: "invalid_request_error",
      code: "invalid_request",
      param: "messages",
    },
  });
  assert.equal(invalidRequest("bad").param, null);
});

Deno.test("flatErrorResponse: SMG's worker-API body {error, code}", async () => {
  const res = flatErrorResponse(404, "WORKER_NOT_FOUND", "no worker with id x");
  assert.equal(res.status, 404);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
  assert.deepEqual(await res.json(), { error: "no worker with id x", code: "WORKER_NOT_FOUND" });
});

Deno.test("badValue: one line naming the flag, quoting the value, saying what is allowed", () => {
  const e = badValue("--policy", "fastest", "one of random, round_robin");
  assert.ok(e instanceof ConfigError);
  assert.equal(e.name, "ConfigError");
  assert.equal(e.message, "--policy: invalid value 'fastest'; one of random, round_robin");
  assert.ok(!e.message.includes("\n"));
  assert.equal(
    badValue("--port", 70000, "0..65535").message,
    "--port: invalid value '70000'; 0..65535",
  );
});
