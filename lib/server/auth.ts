/**
 * Who may call a route, per SMG's auth matrix. Inference needs the bearer `--api-key` when one
 * is set. Control-plane routes (workers, loads, cache flush, mesh status) need a key of
 * `--control-plane-api-keys` when any is configured (the client `--api-key` then no longer
 * opens them): role `admin` for every method, `user` for reads (GET) only, as SMG's
 * `role_allows`; with none configured they fall back to `--api-key`, and with neither they are
 * open. Keys are compared in constant time, every configured key each time. A refusal is a
 * `GatewayError` (401 missing or wrong key, 403 role) answered in the gateway's envelope.
 */

import type { ControlPlaneKey } from "../config/config.ts";
import { GatewayError } from "../core/errors.ts";
import { bearerToken, secretEquals } from "../core/secret.ts";

/** Which keys a route takes: the client's (`--api-key`) or the control plane's. */
export type Guard = "client" | "control";

/** The outcome of a check. */
export interface Verdict {
  /** Null when the request may go on. */
  error: GatewayError | null;
  /** The control-plane key that was presented and recognised (its id; logs), if any. */
  keyId: string | null;
}

/** Checks requests against the configured keys. */
export interface Access {
  /** The verdict for `method` on a route (`template` names it in a 403) with this header. */
  check(guard: Guard, method: string, template: string, authorization: string | null): Verdict;
  /** Whether control-plane keys are configured (their routes then log who did what). */
  readonly controlPlaneKeys: boolean;
}

const ALLOWED: Verdict = { error: null, keyId: null };
const SEND = "send 'Authorization: Bearer <key>'";

const unauthorized = (message: string): Verdict => ({
  error: new GatewayError(401, "unauthorized", message),
  keyId: null,
});

/** What a `user` key may do. */
const READS = new Set(["GET", "HEAD"]);

/** The checks for `apiKey` (`--api-key`) and `keys` (`--control-plane-api-keys`). */
export function createAccess(apiKey: string | null, keys: readonly ControlPlaneKey[]): Access {
  const client = (token: string | null): Verdict => {
    if (apiKey === null) return ALLOWED;
    if (token === null) return unauthorized(`missing API key: ${SEND}`);
    return secretEquals(apiKey, token) ? ALLOWED : unauthorized("invalid API key");
  };
  /** The key whose secret is `token`: every key is compared, so timing tells nothing. */
  const find = (token: string): ControlPlaneKey | null => {
    let found: ControlPlaneKey | null = null;
    for (const k of keys) if (secretEquals(k.key, token) && found === null) found = k;
    return found;
  };
  const control = (method: string, template: string, token: string | null): Verdict => {
    if (keys.length === 0) return client(token);
    if (token === null) {
      return unauthorized(`missing control-plane key: ${SEND} with a --control-plane-api-keys key`);
    }
    const k = find(token);
    if (k === null) {
      const isClientKey = apiKey !== null && secretEquals(apiKey, token);
      return unauthorized(
        isClientKey
          ? "the client API key does not open control-plane routes; use a --control-plane-api-keys key"
          : "invalid control-plane key",
      );
    }
    if (k.role === "admin" || READS.has(method)) return { error: null, keyId: k.id };
    const message =
      `control-plane key '${k.id}' has role user, which may only read (GET); ${method} ${template} needs an admin key`;
    return { error: new GatewayError(403, "forbidden", message), keyId: k.id };
  };
  return {
    controlPlaneKeys: keys.length > 0,
    check: (guard, method, template, authorization) => {
      const token = bearerToken(authorization);
      return guard === "client" ? client(token) : control(method, template, token);
    },
  };
}
