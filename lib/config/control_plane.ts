/**
 * The control plane's keys as `--control-plane-api-keys id:name:role:key` gives them, with SMG's
 * roles: `admin` may do everything, `user` only read (GET). Parsed in `access_flags.ts`, checked
 * per request in `lib/server/auth.ts`.
 */

/** What a control-plane key may do: `admin` everything, `user` read (GET) only. */
export type ControlPlaneRole = "admin" | "user";

/** The control-plane roles, as SMG names them. */
export const CONTROL_PLANE_ROLES: readonly ControlPlaneRole[] = ["admin", "user"];

/** One `--control-plane-api-keys id:name:role:key`. */
export interface ControlPlaneKey {
  /** Identifier, named in logs (never the key). */
  id: string;
  /** Human-readable name. */
  name: string;
  /** What the key may do. */
  role: ControlPlaneRole;
  /** The bearer token itself. */
  key: string;
}
