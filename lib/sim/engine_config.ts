/**
 * Validation of the simulated engine's settings: fails loudly, quoting the value, before an
 * engine with a nonsensical shape (zero capacity, negative speed) runs.
 */

import type { EngineConfig } from "./types.ts";

/** Throws a RangeError naming the first invalid field of `cfg`. */
export function checkEngineConfig(cfg: EngineConfig): void {
  const integers = ["kvTokens", "blockSize", "maxRunning", "prefillChunk"] as const;
  for (const key of integers) {
    if (!Number.isInteger(cfg[key]) || cfg[key] < 1) {
      throw new RangeError(`${key} must be an integer >= 1, got ${cfg[key]}`);
    }
  }
  if (!(cfg.prefillTps > 0) || !Number.isFinite(cfg.prefillTps)) {
    throw new RangeError(`prefillTps must be a finite number > 0, got ${cfg.prefillTps}`);
  }
  for (const key of ["decodeBaseMs", "decodePerReqMs", "timeScale"] as const) {
    if (!(cfg[key] >= 0) || !Number.isFinite(cfg[key])) {
      throw new RangeError(`${key} must be a finite number >= 0, got ${cfg[key]}`);
    }
  }
}
