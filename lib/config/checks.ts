/**
 * Start-up checks that flag declarations share (see `Check` in `flag.ts`); each refuses with a
 * one-line `ConfigError` naming the flag, quoting the value and saying what is allowed.
 */

import { badValue } from "../core/errors.ts";
import type { Check } from "./flag.ts";

/** Refuses a value for which `ok` is false, saying what is `allowed`. */
export function must<T>(ok: (v: T) => boolean, allowed: string): Check<T> {
  return (flag, v) => {
    if (!ok(v)) throw badValue(flag, v, allowed);
    return v;
  };
}

/** A finite number of at least `min`. */
export function atLeast(min: number): Check<number> {
  return must((v) => Number.isFinite(v) && v >= min, `must be >= ${min}`);
}

/** A port to listen on; 0 lets the OS pick one. */
export const listenPort: Check<number> = must(
  (v) => Number.isInteger(v) && v >= 0 && v <= 65535,
  "allowed: 0..65535 (0 picks a free port)",
);

/** A port others dial, so never 0. */
export const dialPort: Check<number> = must(
  (v) => Number.isInteger(v) && v >= 1 && v <= 65535,
  "allowed: 1..65535",
);

/** Not blank. */
export const nonEmpty: Check<string> = must((v) => v.trim() !== "", "must not be empty");
