/**
 * The limits file compiled for lookups: a tenant's policy by key (the default for any other),
 * and the one model rule that applies to a model: an exact match beats any prefix, the longest
 * prefix wins among prefixes, rules never stack (a request counts against its tenant's own
 * limits and at most one rule's).
 */

import type { LimitsFile, ModelRule, ScopeLimits, TenantPolicy } from "./config.ts";

/** One policy, ready for lookups. */
export class CompiledPolicy {
  /** The tenant's own limits. */
  readonly limits: ScopeLimits;
  readonly #exact = new Map<string, ModelRule>();
  /** Longest prefix first, so the first hit is the longest. */
  readonly #prefixes: ModelRule[];
  readonly #byId = new Map<string, ModelRule>();

  constructor(p: TenantPolicy) {
    this.limits = p.limits;
    for (const r of p.modelRules) {
      this.#byId.set(r.ruleId, r);
      if (r.matcher.type === "exact") this.#exact.set(r.matcher.value, r);
    }
    this.#prefixes = p.modelRules.filter((r) => r.matcher.type === "prefix")
      .sort((a, b) => b.matcher.value.length - a.matcher.value.length);
  }

  /** The rule that applies to `model`, if any. */
  ruleFor(model: string): ModelRule | null {
    const exact = this.#exact.get(model);
    if (exact) return exact;
    for (const r of this.#prefixes) if (model.startsWith(r.matcher.value)) return r;
    return null;
  }

  /** The rule called `ruleId`, if any. */
  rule(ruleId: string): ModelRule | null {
    return this.#byId.get(ruleId) ?? null;
  }
}

/** Every policy of a limits file. */
export class PolicySet {
  readonly #default: CompiledPolicy;
  readonly #tenants = new Map<string, CompiledPolicy>();

  constructor(file: LimitsFile) {
    this.#default = new CompiledPolicy(file.defaultPolicy);
    for (const t of file.tenants) this.#tenants.set(t.tenantKey!, new CompiledPolicy(t));
  }

  /** The policy of `tenantKey`: its own, or the default. */
  policyFor(tenantKey: string): CompiledPolicy {
    return this.#tenants.get(tenantKey) ?? this.#default;
  }
}
