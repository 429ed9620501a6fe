/**
 * Who a request's tenant is, as SMG resolves it: the client's bearer key when it is one of
 * `--tenant-api-key tenant:key` (`auth:<tenant>`) or the shared `--api-key` (`auth:` and the
 * key's SHA-256 in hex); else, with `--trust-tenant-header`, the trimmed value of
 * `--tenant-header-name` (`header:<id>`); else the client's address (`ip:<addr>`); else
 * `anonymous`. Keys are looked up by their SHA-256, so a lookup's timing says nothing about a
 * configured key's characters.
 */

import { createHash } from "node:crypto";
import type { HeaderMap } from "../core/http.ts";
import { canonicalIp } from "./tenant_key.ts";

/** What tenant resolution is configured with. */
export interface TenantSettings {
  /** `--api-key`, or null. */
  apiKey: string | null;
  /** `--tenant-api-key` values, `tenant:key` (checked at start). */
  tenantApiKeys: readonly string[];
  /** `--trust-tenant-header`. */
  trustHeader: boolean;
  /** `--tenant-header-name`, lower-case. */
  headerName: string;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Resolves tenants and recognises client keys. */
export class Tenants {
  /** The tenant of each key, by the key's SHA-256 (hex). */
  readonly #byDigest = new Map<string, string>();
  readonly #shared: string | null;
  readonly #s: TenantSettings;

  /** Over `s` (validated at start). */
  constructor(s: TenantSettings) {
    this.#s = s;
    this.#shared = s.apiKey === null ? null : sha256(s.apiKey);
    if (this.#shared !== null) this.#byDigest.set(this.#shared, `auth:${this.#shared}`);
    for (const pair of s.tenantApiKeys) {
      const at = pair.indexOf(":");
      this.#byDigest.set(sha256(pair.slice(at + 1)), `auth:${pair.slice(0, at)}`);
    }
  }

  /** Whether inference routes need a key (`--api-key` or a tenant key is configured). */
  get keysRequired(): boolean {
    return this.#byDigest.size > 0;
  }

  /** The digest of the bearer key in an `Authorization` value, or null without one. */
  #digest(authorization: string | null): string | null {
    if (authorization === null || !authorization.startsWith("Bearer ")) return null;
    return sha256(authorization.slice(7));
  }

  /** The tenant (`auth:...`) whose key the client presented, or null (none, or unknown). */
  authenticate(authorization: string | null): string | null {
    const d = this.#digest(authorization);
    return d === null ? null : this.#byDigest.get(d) ?? null;
  }

  /**
   * Whether the client presented the shared `--api-key` (admin routes take only that one; with
   * only tenant keys configured they refuse every request, as SMG).
   */
  isSharedKey(authorization: string | null): boolean {
    return this.#shared !== null && this.#digest(authorization) === this.#shared;
  }

  /** The tenant of a request already authenticated as `auth` (null: no key) from `remote`. */
  resolve(headers: HeaderMap, remote: string | undefined, auth: string | null): string {
    if (auth !== null) return auth;
    if (this.#s.trustHeader) {
      const id = headers.get(this.#s.headerName)?.trim();
      if (id) return `header:${id}`;
    }
    const ip = remote === undefined ? null : canonicalIp(remote);
    return ip === null ? "anonymous" : `ip:${ip}`;
  }
}
