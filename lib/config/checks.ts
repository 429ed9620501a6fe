/** Range checks shared by the start-up validators; each throws a one-line `ConfigError`. */

import { badValue } from "../core/errors.ts";

/** `v` must be a number of at least `min`. */
export function atLeast(flag: string, v: number, min: number): void {
  if (!(Number.isFinite(v) && v >= min)) throw badValue(flag, v, `must be >= ${min}`);
}
