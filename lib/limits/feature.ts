/**
 * Tenant resolution and per-tenant rate limits, built from the flags for the composition root:
 * who a client is (`Tenants`, also the main port's key check) and, with
 * `--tenant-rate-limit-enabled`, the limiter over the policy file (read and checked here, so a
 * bad file stops the gateway at start with a `ConfigError`).
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../core/clock.ts";
import { loadLimits } from "./config.ts";
import { TenantLimiter } from "./limiter.ts";
import { PolicySet } from "./policy.ts";
import { Tenants } from "./tenants.ts";
import type { Metrics } from "../metrics/metrics.ts";

/** The client keys and tenant resolution of `config`. */
export function createTenants(config: GatewayConfig): Tenants {
  return new Tenants({
    apiKey: config.apiKey,
    tenantApiKeys: config.tenants.apiKeys,
    trustHeader: config.tenants.trustHeader,
    headerName: config.tenants.headerName,
  });
}

/** The tenant limiter of `config`, or null when the limits are off; throws `ConfigError`. */
export function createLimiter(
  config: GatewayConfig,
  clock: Clock,
  metrics: Metrics,
): TenantLimiter | null {
  const rl = config.tenantRateLimit;
  if (!rl.enabled) return null;
  const file = loadLimits(rl.configPath!, config.tenants.trustHeader);
  return new TenantLimiter(new PolicySet(file), clock, metrics);
}
