/**
 * Per-tenant rate limits (`--tenant-rate-limit-enabled`), as SMG's: once per logical request,
 * before routing and never again on its retries, the request's estimated prompt tokens and one
 * request are reserved in its tenant's buckets and in those of the one model rule that applies
 * (`policy.ts`); if either scope lacks them the request is denied (429
 * `tenant_rate_limit_exceeded`, `Retry-After` the seconds until both would hold them, none when
 * the ask exceeds a capacity and can never be admitted). The admitted request's `Charge` is
 * settled once: to the real token count (prompt + completion) when the answer reports it,
 * charging or refunding the difference; to what was delivered when the client leaves mid-answer
 * (the prompt and the tokens streamed so far), freeing the rest of the reservation; and when
 * neither is known (an error answered, a body without usage), the reserved estimate stays
 * charged, as upstream keeps it.
 *
 * Cluster mode (`mesh/adapters/rate_limit_sync.ts`) hears every local charge (`onCharge`) to
 * share it, and takes the peers' (`applyRemote`) out of the same buckets.
 *
 * Scopes whose buckets are full again and hold no open reservation are dropped when the table
 * has doubled since the last sweep, so tenants keyed by client address cannot grow it forever.
 */

import type { Clock } from "../core/clock.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { CounterSeries, GaugeSeries } from "../metrics/fast.ts";
import { ScopeBucket } from "./bucket.ts";
import type { ScopeLimits } from "./config.ts";
import type { PolicySet } from "./policy.ts";

/** Tokens an answer used. */
export interface TokenUsage {
  /** Prompt tokens. */
  prompt: number;
  /** Completion tokens. */
  completion: number;
}

/** The scope id of a tenant's own buckets, or of one of its rules': no `:` in it. */
export function scopeId(tenant: string, ruleId: string | null): string {
  const t = encodeURIComponent(tenant);
  return ruleId === null ? t : `${t}/${encodeURIComponent(ruleId)}`;
}

/** The tenant and rule of a scope id, or null if it is none. */
export function parseScope(id: string): { tenant: string; ruleId: string | null } | null {
  try {
    const [t, r, ...more] = id.split("/");
    if (more.length > 0 || t === "") return null;
    return {
      tenant: decodeURIComponent(t),
      ruleId: r === undefined ? null : decodeURIComponent(r),
    };
  } catch {
    return null;
  }
}

/**
 * Hears a local charge: `tokens` (negative: a refund) and `requests` taken in a scope, and
 * `share`, the larger of the two as a fraction of the scope's capacity (0 for a refund).
 */
export type ChargeListener = (
  scope: string,
  tokens: number,
  requests: number,
  share: number,
) => void;

/** One admitted request's reservation, resolved once. */
export class Charge {
  readonly #limiter: TenantLimiter;
  readonly #scopes: [string, ScopeBucket][];
  /** The tokens reserved (the prompt's estimate). */
  readonly estimate: number;
  #live: (() => TokenUsage) | null = null;
  #open = true;

  /** Reserved by `limiter` in `scopes`. */
  constructor(limiter: TenantLimiter, scopes: [string, ScopeBucket][], estimate: number) {
    this.#limiter = limiter;
    this.#scopes = scopes;
    this.estimate = estimate;
  }

  /** Whether it is not resolved yet. */
  get open(): boolean {
    return this.#open;
  }

  /**
   * The answer's real usage: the reservation is settled to it (first resolution only). A prompt
   * count of 0 means none was reported (a stream's running counts may omit it): the estimate
   * stands for it.
   */
  final(prompt: number, completion: number): void {
    this.#resolve((prompt > 0 ? prompt : this.estimate) + completion);
  }

  /** How to read the usage delivered so far, should the client leave before the end. */
  live(read: () => TokenUsage): void {
    this.#live = read;
  }

  /**
   * The request is done (its response delivered or abandoned) without a final usage: charges
   * what was delivered if that is known (the rest of the reservation is freed), else keeps the
   * estimate.
   */
  finish(): void {
    if (!this.#open) return;
    const u = this.#live?.();
    if (u && (u.completion > 0 || u.prompt > 0)) {
      this.#resolve((u.prompt > 0 ? u.prompt : this.estimate) + u.completion);
    } else this.#resolve(this.estimate);
  }

  #resolve(total: number): void {
    if (!this.#open) return;
    this.#open = false;
    this.#limiter.settle(this.#scopes, total, total - this.estimate);
  }
}

/** The tenant buckets of one router. */
export class TenantLimiter {
  readonly #policies: PolicySet;
  readonly #clock: Clock;
  readonly #allowed: CounterSeries;
  readonly #rejected: CounterSeries;
  readonly #reserved: CounterSeries;
  readonly #settled: CounterSeries;
  readonly #reservations: GaugeSeries;
  readonly #buckets = new Map<string, ScopeBucket>();
  /** Each tenant's own scope id, so that a request does not encode it again. */
  readonly #ownScopes = new Map<string, string>();
  #sweepAt = 1024;
  #open = 0;
  readonly #listeners = new Set<() => void>();
  /** Hears every local charge (cluster mode shares them); null: nobody. */
  onCharge: ChargeListener | null = null;

  /** Limits by `policies`, on `clock`, counted in `metrics`. */
  constructor(policies: PolicySet, clock: Clock, metrics: Metrics) {
    this.#policies = policies;
    this.#clock = clock;
    // The series a request touches, looked up once.
    this.#allowed = metrics.tenantRateLimit.with("allowed");
    this.#rejected = metrics.tenantRateLimit.with("rejected");
    this.#reserved = metrics.tenantTokens.with("reserved");
    this.#settled = metrics.tenantTokens.with("settled");
    this.#reservations = metrics.tenantReservations.with();
    this.#reservations.set(0);
  }

  /** Reservations not yet resolved. */
  get open(): number {
    return this.#open;
  }

  /** Calls `listener` after each reservation is resolved; returns its removal. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Scopes with buckets now. */
  get scopes(): number {
    return this.#buckets.size;
  }

  /** Tokens and requests available in a scope now (full when it has no buckets). */
  available(scope: string): { tokens: number; requests: number } | null {
    const b = this.#bucket(scope);
    if (!b) return null;
    const now = this.#clock.now();
    return { tokens: b.tokens.level(now), requests: b.requests.level(now) };
  }

  /**
   * Reserves `estimate` tokens and one request for `tenant` (and `model`'s rule): the charge, or
   * the seconds to wait when denied (Infinity: the ask exceeds a capacity).
   */
  reserve(tenant: string, model: string | null, estimate: number): Charge | number {
    const policy = this.#policies.policyFor(tenant);
    const now = this.#clock.now();
    const scopes: [string, ScopeBucket][] = [];
    let own = this.#ownScopes.get(tenant);
    if (own === undefined) this.#ownScopes.set(tenant, own = scopeId(tenant, null));
    scopes.push([own, this.#bucketFor(own, policy.limits, now)]);
    const rule = model === null ? null : policy.ruleFor(model);
    if (rule) {
      const id = scopeId(tenant, rule.ruleId);
      scopes.push([id, this.#bucketFor(id, rule.limits, now)]);
    }
    let retry = 0;
    for (const [, b] of scopes) {
      const d = b.dryRun(estimate, 1, now);
      if (!d.allowed) retry = Math.max(retry, d.retryAfterSecs);
    }
    if (retry > 0) {
      this.#rejected.inc();
      return retry;
    }
    for (const [id, b] of scopes) {
      b.take(estimate, 1, now);
      b.open++;
      this.onCharge?.(
        id,
        estimate,
        1,
        Math.max(estimate / b.tokens.capacity, 1 / b.requests.capacity),
      );
    }
    this.#allowed.inc();
    this.#reserved.inc(estimate);
    this.#reservations.set(++this.#open);
    return new Charge(this, scopes, estimate);
  }

  /** Resolves a charge of `scopes` at `total` tokens: `delta` more than reserved (or fewer). */
  settle(scopes: readonly [string, ScopeBucket][], total: number, delta: number): void {
    const now = this.#clock.now();
    for (const [id, b] of scopes) {
      b.settle(delta, now);
      b.open--;
      if (delta !== 0) this.onCharge?.(id, delta, 0, Math.max(0, delta / b.tokens.capacity));
    }
    this.#settled.inc(Math.max(0, total));
    this.#reservations.set(--this.#open);
    for (const l of this.#listeners) l();
  }

  /** A peer's consumption in `scope`: taken out of its buckets here too (debt allowed). */
  applyRemote(scope: string, tokens: number, requests: number): void {
    const b = this.#bucket(scope);
    if (!b) return;
    b.take(tokens, requests, this.#clock.now());
  }

  /** The buckets of a scope id, made full if new; null for a scope no policy has. */
  #bucket(scope: string): ScopeBucket | null {
    const known = this.#buckets.get(scope);
    if (known) return known;
    const s = parseScope(scope);
    if (!s) return null;
    const policy = this.#policies.policyFor(s.tenant);
    const limits = s.ruleId === null ? policy.limits : policy.rule(s.ruleId)?.limits;
    return limits ? this.#bucketFor(scope, limits, this.#clock.now()) : null;
  }

  #bucketFor(id: string, limits: ScopeLimits, now: number): ScopeBucket {
    let b = this.#buckets.get(id);
    if (!b) {
      if (this.#buckets.size >= this.#sweepAt) this.#sweep(now);
      this.#buckets.set(id, b = new ScopeBucket(limits, now));
    }
    return b;
  }

  #sweep(now: number): void {
    for (const [id, b] of this.#buckets) if (b.full(now)) this.#buckets.delete(id);
    this.#ownScopes.clear();
    this.#sweepAt = Math.max(1024, 2 * this.#buckets.size);
  }
}
