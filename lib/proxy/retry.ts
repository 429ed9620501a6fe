/**
 * Retry arithmetic: the jittered exponential delay before retry k (0-based): min(initial ×
 * multiplier^k, max) × a random factor in [1 − jitter, 1 + jitter]. Which answers are retried is
 * `lib/workers/failures.ts`'s.
 */

import type { Random } from "../core/clock.ts";
import type { RetryConfig } from "../config/config.ts";

/** Delay in ms before retry `k` (0 = the first retry). */
export function backoffMs(k: number, cfg: RetryConfig, random: Random): number {
  const base = Math.min(cfg.initialBackoffMs * cfg.multiplier ** k, cfg.maxBackoffMs);
  const factor = 1 - cfg.jitter + 2 * cfg.jitter * random();
  return Math.max(0, base * factor);
}

/** Total attempts allowed, the first included. */
export function maxAttempts(cfg: RetryConfig): number {
  return cfg.disabled ? 1 : cfg.maxAttempts;
}
