/**
 * Domain errors with a stable `code` and HTTP status, and the one place that turns them into
 * responses: SMG's envelope `{"error":{"message","type","code","param"}}` plus
 * `X-SMG-Error-Code`. Worker-management routes use SMG's flat `{error, code}` body instead.
 */

import type { Reply } from "./http.ts";

/** HTTP reason phrases used as the envelope's `type`, as upstream does for gateway errors. */
export const REASON_PHRASES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** Options for a {@link GatewayError} beyond status, code and message. */
export interface GatewayErrorOptions {
  /** The request field at fault, for validation errors. */
  param?: string | null;
  /** Seconds for a `Retry-After` header. */
  retryAfter?: number;
  /** Envelope `type`; defaults to the HTTP reason phrase. */
  type?: string;
}

/** An error the gateway answers itself, with a stable snake_case code. */
export class GatewayError extends Error {
  /** HTTP status sent to the client. */
  readonly status: number;
  /** Stable machine-readable code, e.g. `no_available_workers`. */
  readonly code: string;
  /** Field at fault, if any. */
  readonly param: string | null;
  /** Seconds for `Retry-After`, if any. */
  readonly retryAfter?: number;
  /** Envelope type. */
  readonly type: string;

  /** Builds an error answered with `status` and `code`. */
  constructor(status: number, code: string, message: string, opts: GatewayErrorOptions = {}) {
    super(message);
    this.name = "GatewayError";
    this.status = status;
    this.code = code;
    this.param = opts.param ?? null;
    this.retryAfter = opts.retryAfter;
    this.type = opts.type ?? REASON_PHRASES[status] ?? "Error";
  }
}

/** A 400 for a body that is not valid JSON or has a field of the wrong shape. */
export function invalidRequest(message: string, param: string | null = null): GatewayError {
  return new GatewayError(400, "invalid_request", message, {
    param,
    type: "invalid_request_error",
  });
}

/** 413 for a request body over `max` bytes. */
export function payloadTooLarge(max: number): GatewayError {
  return new GatewayError(413, "payload_too_large", `request body exceeds the ${max}-byte limit`);
}

const encoder = new TextEncoder();

/** The envelope reply for a gateway error, with `x-request-id` when known. */
export function errorReply(err: GatewayError, requestId?: string): Reply {
  const body = JSON.stringify({
    error: { message: err.message, type: err.type, code: err.code, param: err.param },
  });
  const headers: [string, string][] = [
    ["content-type", "application/json"],
    ["x-smg-error-code", err.code],
  ];
  if (requestId) headers.push(["x-request-id", requestId]);
  if (err.retryAfter !== undefined) headers.push(["retry-after", String(err.retryAfter)]);
  return { status: err.status, headers, body: encoder.encode(body) };
}

/** The envelope response for a gateway error, with `x-request-id` when known. */
export function errorResponse(err: GatewayError, requestId?: string): Response {
  const r = errorReply(err, requestId);
  return new Response(r.body as Uint8Array<ArrayBuffer>, { status: r.status, headers: r.headers });
}

/** SMG's flat worker-service error: `{error, code}` with an upper-case code. */
export function flatErrorResponse(status: number, code: string, message: string): Response {
  return Response.json({ error: message, code }, { status });
}

/** Bad configuration, reported as one line at start; the process exits 2. */
export class ConfigError extends Error {
  /**
   * The one flag at fault (e.g. `--port`) when the message starts with it: a config file's
   * setting is then reported at its line instead (`validate.ts`).
   */
  readonly flag?: string;

  /** Wraps a one-line message, which starts with `flag` when one is given. */
  constructor(message: string, flag?: string) {
    super(message);
    this.name = "ConfigError";
    this.flag = flag;
  }
}

/** A ConfigError naming the flag, quoting the value and saying what is allowed. */
export function badValue(flag: string, value: unknown, allowed: string): ConfigError {
  return new ConfigError(`${flag}: invalid value '${String(value)}'; ${allowed}`, flag);
}
