/**
 * Cluster-wide tenant limits (`--tenant-rate-limit-scope cluster`, ours): each router keeps its
 * own counts of what its requests took from each tenant scope, and shares them over the
 * replicated store as SMG's `rl:` counters are shaped: one shard per counter and router, key
 * `{counter}:{router}` in the `rl` namespace, value 16 bytes (epoch u64 big-endian, count i64
 * big-endian), the epoch a minute of wall time, a new epoch starting its count again from 0,
 * counts only growing within an epoch. Counters: `t.{scope}` (LLM tokens) and `r.{scope}`
 * (requests), for each scope of `lib/limits/limiter.ts`.
 *
 * Every router runs the same buckets for every scope. Its own requests take from them at once;
 * a peer's shard growing by n (or a new epoch's count n) takes n from them when it arrives
 * (debt allowed). So every router's buckets see the whole cluster's consumption, late by the
 * time a share takes to spread (D: up to `--tenant-rate-limit-sync-ms`, the publish interval,
 * plus a hop), and N routers admit about the configured rate, not N times it. A router that
 * takes `EAGER_SHARE` of a scope's capacity before the interval is up publishes at once, so a
 * quick burst is seen by the peers after that share and a hop, not after the interval. What the cluster
 * can take beyond one router's view is what the others took in the last D, not yet seen: about
 * (N-1)·rate·D in steady state; after an idle spell, when every bucket is full, a burst that
 * reaches all N routers within D can take up to N times a bucket's capacity before they hear of
 * each other. That excess is then debt in every router's buckets, repaid before the tenant is
 * admitted again, so over any window long enough to repay it the cluster holds the rate.
 *
 * A refund (a request settled below its estimate) cannot lower a count: it is kept and offsets
 * the router's next charges. A router joining mid-minute takes its peers' counts of the
 * current epoch as new consumption (conservative). A router restarted under the same name
 * learns its earlier shard from its peers and counts on from it.
 */

import type { Clock } from "../../core/clock.ts";
import type { Logger } from "../../core/log.ts";
import type { TenantLimiter } from "../../limits/limiter.ts";
import type { LwwStore } from "../store/lww_store.ts";

/** The store namespace of the shards (SMG's `rl:`). */
export const RATE_LIMIT_NS = "rl";

/**
 * The share of a scope's capacity this router may take before publishing at once, without
 * waiting for the interval: bounds what a burst takes unseen by the peers to about this share
 * per router plus what arrives while a share is in transit.
 */
export const EAGER_SHARE = 1 / 64;

/** A minute per epoch: the limits are per minute. */
const EPOCH_MS = 60_000;

/** A shard: epoch and count. */
export interface Shard {
  epoch: number;
  count: number;
}

/** A shard's 16 bytes: epoch u64 and count i64, both big-endian. */
export function encodeShard(s: Shard): Uint8Array {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, BigInt(s.epoch));
  v.setBigInt64(8, BigInt(Math.round(s.count)));
  return b;
}

/** A shard from its 16 bytes, or null if malformed. */
export function decodeShard(b: Uint8Array): Shard | null {
  if (b.length !== 16) return null;
  const v = new DataView(b.buffer, b.byteOffset, 16);
  return { epoch: Number(v.getBigUint64(0)), count: Number(v.getBigInt64(8)) };
}

/**
 * SMG's aggregate of a counter over the shards in `store`: the sum of the counts at the newest
 * epoch seen (older epochs' shards ignored).
 */
export function aggregate(store: LwwStore, counter: string): number {
  let epoch = -1;
  let sum = 0;
  for (const [key, value] of store.live(RATE_LIMIT_NS)) {
    if (key.slice(0, key.lastIndexOf(":")) !== counter) continue;
    const s = decodeShard(value);
    if (!s) continue;
    if (s.epoch > epoch) [epoch, sum] = [s.epoch, 0];
    if (s.epoch === epoch) sum += s.count;
  }
  return sum;
}

/** What the sync works with. */
export interface RateLimitSyncDeps {
  /** This router's limiter. */
  limiter: TenantLimiter;
  /** The replicated store. */
  store: LwwStore;
  /** This router's mesh name (no `:`). */
  router: string;
  /** Timers and store times. */
  clock: Clock;
  /** Wall time in ms, for epochs (default `Date.now`). */
  wall?: () => number;
  /** Publish interval, ms. */
  syncMs: number;
  /** Logger. */
  log: Logger;
  /** Counts peers' tokens and requests taken here, and shards published (default none). */
  count?: (kind: "tokens_in" | "requests_in" | "shards_out", n: number) => void;
}

/** Shares one router's tenant counts and takes its peers'. */
export class RateLimitSync {
  readonly #d: RateLimitSyncDeps;
  readonly #wall: () => number;
  /** Charges not yet published, by counter (negative: refunds to offset). */
  readonly #pending = new Map<string, number>();
  /** This router's shards as last published, by counter. */
  readonly #own = new Map<string, Shard>();
  /** Peers' shards as last seen, by store key. */
  readonly #seen = new Map<string, Shard>();
  /** The share of each scope's capacity charged here since the last flush. */
  readonly #shares = new Map<string, number>();
  #eagerQueued = false;
  #cancel: () => void = () => {};
  #stopped = false;

  /** Hooks the limiter's charges and the store's changes. */
  constructor(d: RateLimitSyncDeps) {
    this.#d = d;
    this.#wall = d.wall ?? Date.now;
    d.limiter.onCharge = (scope, tokens, requests, share) => {
      this.#add(`t.${scope}`, tokens);
      if (requests !== 0) this.#add(`r.${scope}`, requests);
      const taken = (this.#shares.get(scope) ?? 0) + share;
      this.#shares.set(scope, taken);
      if (taken >= EAGER_SHARE && !this.#eagerQueued && !this.#stopped) {
        // A quick run of charges: published on the next turn, not at the interval.
        this.#eagerQueued = true;
        d.clock.after(0, () => {
          this.#eagerQueued = false;
          if (!this.#stopped) this.flush();
        });
      }
    };
    d.store.onChange((e, origin) => {
      if (origin !== "remote" || e.ns !== RATE_LIMIT_NS || e.value === null) return;
      this.#apply(e.key, e.value);
    });
  }

  /** Publishes every `syncMs` until stopped. */
  start(): void {
    if (this.#stopped) return;
    this.#cancel = this.#d.clock.after(this.#d.syncMs, () => {
      this.flush();
      this.start();
    });
  }

  /** Stops publishing and hearing charges. */
  stop(): void {
    this.#stopped = true;
    this.#cancel();
    this.#d.limiter.onCharge = null;
  }

  /** Writes the shard of every counter charged since the last flush. */
  flush(): void {
    this.#shares.clear();
    const epoch = Math.floor(this.#wall() / EPOCH_MS);
    for (const [counter, delta] of this.#pending) {
      if (delta <= 0) continue;
      const cur = this.#own.get(counter);
      const shard = cur && cur.epoch === epoch
        ? { epoch, count: cur.count + delta }
        : { epoch, count: delta };
      this.#pending.delete(counter);
      this.#publish(counter, shard);
    }
  }

  #add(counter: string, n: number): void {
    this.#pending.set(counter, (this.#pending.get(counter) ?? 0) + n);
  }

  #publish(counter: string, shard: Shard): void {
    this.#own.set(counter, shard);
    const d = this.#d;
    const r = d.store.write(
      RATE_LIMIT_NS,
      `${counter}:${d.router}`,
      encodeShard(shard),
      d.clock.now(),
    );
    if (typeof r === "string" && r !== "stale") {
      d.log.warn("rate-limit shard not replicated", { reason: r, counter });
    } else d.count?.("shards_out", 1);
  }

  /** A shard learned from a peer. */
  #apply(key: string, value: Uint8Array): void {
    const at = key.lastIndexOf(":");
    const counter = key.slice(0, at);
    const router = key.slice(at + 1);
    const s = decodeShard(value);
    if (at < 0 || !s || (!counter.startsWith("t.") && !counter.startsWith("r."))) return;
    if (router === this.#d.router) return this.#adopt(counter, s);
    const prev = this.#seen.get(key);
    let delta: number;
    if (!prev) {
      // First sight: its count in the current epoch is recent consumption.
      delta = s.epoch === Math.floor(this.#wall() / EPOCH_MS) ? s.count : 0;
    } else if (s.epoch === prev.epoch) delta = s.count - prev.count;
    else if (s.epoch > prev.epoch) delta = s.count;
    else return;
    this.#seen.set(key, s);
    if (delta <= 0) return;
    const scope = counter.slice(2);
    if (counter[0] === "t") {
      this.#d.limiter.applyRemote(scope, delta, 0);
      this.#d.count?.("tokens_in", delta);
    } else {
      this.#d.limiter.applyRemote(scope, 0, delta);
      this.#d.count?.("requests_in", delta);
    }
  }

  /**
   * This router's own counter as an earlier process under the same name wrote it: counting goes
   * on from it within its epoch (the peers already took it), and is published again.
   */
  #adopt(counter: string, s: Shard): void {
    const cur = this.#own.get(counter);
    if (cur && (cur.epoch > s.epoch || (cur.epoch === s.epoch && cur.count >= s.count))) return;
    const epoch = Math.floor(this.#wall() / EPOCH_MS);
    if (s.epoch !== epoch) return;
    const mine = cur && cur.epoch === epoch ? cur.count : 0;
    this.#publish(counter, { epoch, count: s.count + mine });
  }
}
