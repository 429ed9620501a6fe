/**
 * Who may call the gateway, declared once (see `flag.ts`): the browser origins of CORS
 * (`--cors-allowed-origins`) and the role-carrying keys of the control-plane routes
 * (`--control-plane-api-keys id:name:role:key`), with SMG's names. A malformed key never has
 * its secret part quoted in the refusal.
 */

import { badValue, ConfigError } from "../core/errors.ts";
import type { Check, Declarations, Kind } from "./flag.ts";
import { list } from "./kinds.ts";
import {
  CONTROL_PLANE_ROLES,
  type ControlPlaneKey,
  type ControlPlaneRole,
} from "./control_plane.ts";

const FORMAT = "expected id:name:role:key with role admin or user, e.g. ops:Operations:admin:KEY";

/** One `id:name:role:key`; the key may itself hold colons (SMG splits at the first three). */
function parseKey(flag: string, raw: string): ControlPlaneKey {
  const first = raw.indexOf(":");
  const second = raw.indexOf(":", first + 1);
  const third = second < 0 ? -1 : raw.indexOf(":", second + 1);
  if (first < 0 || second < 0 || third < 0) {
    // Which part would be the key is unknown, so nothing of the value is shown.
    throw new ConfigError(`${flag}: invalid value (not shown: it may hold a key); ${FORMAT}`, flag);
  }
  const id = raw.slice(0, first).trim();
  const name = raw.slice(first + 1, second).trim();
  const role = raw.slice(second + 1, third).trim().toLowerCase();
  const key = raw.slice(third + 1);
  if (id === "") throw badValue(flag, `:${name}:${role}:…`, `the id is empty; ${FORMAT}`);
  if (!CONTROL_PLANE_ROLES.includes(role as ControlPlaneRole)) {
    throw badValue(flag, `${id}:${name}:${role}:…`, `role must be admin or user`);
  }
  if (key.trim() === "") throw badValue(flag, `${id}:${name}:${role}:`, "the key is empty");
  return { id, name, role: role as ControlPlaneRole, key };
}

/** `--control-plane-api-keys`: one key per value, over all repeats. */
const controlPlaneKeys: Kind<ControlPlaneKey[]> = {
  takes: "values",
  parse: (flag, raws) => raws.map((r) => parseKey(flag, r)),
  // Never the secret, should a default ever be shown.
  show: (ks) => ks.map((k) => `${k.id}:${k.name}:${k.role}:…`).join(" "),
};

/** Ids and keys are each used once: a repeated key would make its role ambiguous. */
const distinctKeys: Check<ControlPlaneKey[]> = (flag, ks) => {
  const ids = new Set<string>();
  const keys = new Set<string>();
  for (const k of ks) {
    if (ids.has(k.id)) throw badValue(flag, `${k.id}:…`, "each id may appear once");
    if (keys.has(k.key)) {
      throw badValue(flag, `${k.id}:${k.name}:${k.role}:…`, "its key is already another id's");
    }
    ids.add(k.id);
    keys.add(k.key);
  }
  return ks;
};

/**
 * An origin as browsers send it in `Origin`: `scheme://host[:port]`, lower-case, without a
 * default port or a trailing slash; null when `raw` is none.
 */
export function normalizeOrigin(raw: string): string | null {
  const s = raw.trim().replace(/\/$/, "");
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+$/i.test(s)) return null;
  if (!/^https?:/i.test(s)) return s.toLowerCase(); // e.g. chrome-extension://ID
  try {
    return new URL(s).origin;
  } catch {
    return null;
  }
}

/** Origins normalised; a lone `*` means any origin, as no list does. */
const origins: Check<string[]> = (flag, os) => {
  if (os.includes("*")) {
    if (os.length > 1) {
      throw badValue(flag, os.join(" "), "'*' (any origin) cannot be listed with other origins");
    }
    return [];
  }
  return os.map((o) => {
    const n = normalizeOrigin(o);
    if (n === null) {
      throw badValue(flag, o, "expected an origin such as https://app.example.com (no path)");
    }
    return n;
  });
};

/** The access flags' top-level fields, in --help order. */
export const ACCESS_FLAGS = {
  corsAllowedOrigins: {
    name: "cors-allowed-origins",
    kind: list,
    default: [],
    help: "origins browsers may call from (default: any origin, method and header)",
    check: origins,
  },
  controlPlaneApiKeys: {
    name: "control-plane-api-keys",
    kind: controlPlaneKeys,
    default: [],
    help: "keys of the worker and admin routes, id:name:role:key; role admin, or user (GET only)",
    check: distinctKeys,
  },
} satisfies Partial<Declarations>;
