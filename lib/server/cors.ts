/**
 * CORS on the main port, as SMG's outermost layer (`--cors-allowed-origins`): every OPTIONS
 * request is a preflight answered 200 here, before routing and authentication, and every other
 * response carries the CORS headers, which replace any a worker sent. With no origins listed,
 * any origin, method and header is allowed and every response header exposed; with origins,
 * only those, methods GET, POST, PATCH, DELETE and OPTIONS, headers content-type and
 * authorization, and `x-request-id` exposed. Preflights may be cached for an hour.
 *
 * One deviation: where SMG answers `access-control-allow-headers: *`, a preflight that names its
 * headers gets them back instead, because browsers never let `*` cover `Authorization` (Fetch
 * standard, CORS-protocol), so with `*` no browser could send a bearer key.
 */

import type { HeaderMap, Reply } from "../core/http.ts";

/** What the main port's entry asks of CORS. */
export interface Cors {
  /** The answer to an OPTIONS request. */
  preflight(headers: HeaderMap): Reply;
  /** Adds the CORS headers of a response to the request carrying `origin` (in place). */
  decorate(h: [string, string][], origin: string | null): void;
}

const VARY = "origin, access-control-request-method, access-control-request-headers";
const MAX_AGE: [string, string] = ["access-control-max-age", "3600"];

/** CORS for `allowedOrigins` (normalised by `validate.ts`); empty allows any origin. */
export function createCors(allowedOrigins: readonly string[]): Cors {
  const any = allowedOrigins.length === 0;
  const allowed = new Set(allowedOrigins);
  const ANY_ORIGIN: [string, string] = ["access-control-allow-origin", "*"];
  /** The allow-origin header for `origin`, or null (the browser then keeps the answer). */
  const allowOrigin = (origin: string | null): [string, string] | null =>
    any
      ? ANY_ORIGIN
      : origin !== null && allowed.has(origin)
      ? ["access-control-allow-origin", origin]
      : null;
  const EXPOSE: [string, string] = ["access-control-expose-headers", any ? "*" : "x-request-id"];
  const VARY_PAIR: [string, string] = ["vary", VARY];
  return {
    preflight(headers) {
      const asked = headers.get("access-control-request-headers")?.trim();
      const origin = allowOrigin(headers.get("origin"));
      const h: [string, string][] = origin ? [origin] : [];
      h.push(
        ["access-control-allow-methods", any ? "*" : "GET,POST,PATCH,DELETE,OPTIONS"],
        ["access-control-allow-headers", any ? (asked || "*") : "content-type,authorization"],
        MAX_AGE,
        VARY_PAIR,
      );
      return { status: 200, headers: h, body: null };
    },
    decorate(h, origin) {
      let vary: string | null = null;
      for (let i = h.length - 1; i >= 0; i--) {
        const k = h[i][0];
        if (k === "vary") {
          vary = vary === null ? h[i][1] : `${h[i][1]}, ${vary}`;
          h.splice(i, 1);
        } else if (k.startsWith("access-control-")) h.splice(i, 1);
      }
      const o = allowOrigin(origin);
      if (o) h.push(o);
      h.push(EXPOSE);
      // A worker's own Vary (e.g. accept-encoding) is kept; `*` already covers everything.
      if (vary === null || vary.trim() === "") h.push(VARY_PAIR);
      else h.push(["vary", vary.includes("*") ? "*" : `${vary}, ${VARY}`]);
    },
  };
}
