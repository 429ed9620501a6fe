/**
 * Every gateway setting, in --help order: the declarations of the `*_flags.ts` files keyed by
 * where they go in `GatewayConfig` (the type checks that each field has one, of its type), the
 * flat list of them that `cli.ts` and `validate.ts` walk, and the defaults they declare.
 */

import { ACCESS_FLAGS } from "./access_flags.ts";
import { DISCOVERY_FLAGS } from "./discovery_flags.ts";
import type { Declarations, Flag, Section, Setting } from "./flag.ts";
import { FRONT_FLAGS } from "./front_flags.ts";
import { MESH_FLAGS } from "./mesh_flags.ts";
import {
  CACHE_AWARE_FLAGS,
  LEAST_LOAD_FLAGS,
  MANUAL_FLAGS,
  PD_FLAGS,
  PREFIX_HASH_FLAGS,
  ROUTING_FLAGS,
} from "./routing_flags.ts";
import {
  ADMISSION_FLAGS,
  SERVER_FLAGS,
  TENANT_FLAGS,
  TENANT_RATE_LIMIT_FLAGS,
} from "./server_flags.ts";
import { TLS_FLAGS } from "./tls_flags.ts";
import { TRACING_FLAGS } from "./tracing_flags.ts";
import type { GatewayConfig } from "./types.ts";
import {
  CIRCUIT_BREAKER_FLAGS,
  HEALTH_FLAGS,
  LOAD_MONITOR_FLAGS,
  RETRY_FLAGS,
} from "./worker_flags.ts";

/** The declaration of every field, in --help order. */
export const DECLARATIONS: Declarations = {
  ...SERVER_FLAGS,
  ...ACCESS_FLAGS,
  health: HEALTH_FLAGS,
  circuitBreaker: CIRCUIT_BREAKER_FLAGS,
  retry: RETRY_FLAGS,
  loadMonitor: LOAD_MONITOR_FLAGS,
  admission: ADMISSION_FLAGS,
  front: FRONT_FLAGS,
  tls: TLS_FLAGS,
  tenants: TENANT_FLAGS,
  tenantRateLimit: TENANT_RATE_LIMIT_FLAGS,
  ...ROUTING_FLAGS,
  leastLoad: LEAST_LOAD_FLAGS,
  prefixHash: PREFIX_HASH_FLAGS,
  manual: MANUAL_FLAGS,
  cacheAware: CACHE_AWARE_FLAGS,
  pd: PD_FLAGS,
  mesh: MESH_FLAGS,
  discovery: DISCOVERY_FLAGS,
  tracing: TRACING_FLAGS,
};

/** One declared field: where it is and what is declared for it (value type erased). */
export interface Entry {
  /** The section holding the field; null for a top-level field. */
  section: Section | null;
  /** The field's name. */
  field: string;
  /** Its declaration. */
  setting: Setting<unknown>;
}

type Erased = Setting<unknown> | Record<string, Setting<unknown>>;

/** Every declared field, in --help order. */
export const ENTRIES: readonly Entry[] = Object.entries(DECLARATIONS as Record<string, Erased>)
  .flatMap(([key, value]): Entry[] =>
    // A section's record never has a field called `default`; a declaration always does.
    "default" in value
      ? [{ section: null, field: key, setting: value as Setting<unknown> }]
      : Object.entries(value).map(([field, setting]) => ({
        section: key as Section,
        field,
        setting,
      }))
  );

/** Whether a declaration is a flag (rather than a field that no flag sets). */
export function isFlag(s: Setting<unknown>): s is Flag<unknown> {
  return s.name !== undefined;
}

/** The object that holds a field of `section` in `c`: `c` itself or one of its sections. */
export function holder(c: GatewayConfig, section: Section | null): Record<string, unknown> {
  return (section === null ? c : c[section]) as unknown as Record<string, unknown>;
}

const DEFAULTS = (() => {
  const c: Record<string, unknown> = {};
  for (const { section, field, setting } of ENTRIES) {
    const into = section === null ? c : (c[section] ??= {}) as Record<string, unknown>;
    into[field] = setting.default;
  }
  // Complete: `Declarations` has a declaration for every field, of the field's type.
  return c as unknown as GatewayConfig;
})();

/** The declared defaults (SMG's, where SMG has the flag); a fresh copy each call. */
export function defaultConfig(): GatewayConfig {
  return structuredClone(DEFAULTS);
}
