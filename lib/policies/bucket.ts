/**
 * `bucket`: routes the PD prefill leg by request size. In: prefill candidates and the request's
 * size (token count when token ids are known, else the routing text's length in UTF-16 units).
 * Out: the worker whose size range holds the request, or the least loaded candidate.
 *
 * Per model, each prefill worker owns a contiguous range of sizes. The ranges start as an even
 * split of [0, 4096) with the last one open-ended; every BUCKET_ADJUST_INTERVAL_MS they adapt to
 * the sizes routed in the last window (of the same length) so that each range carries about the
 * same total, but only when the per-bucket load moved by more than 2×. When
 * the candidates' window totals are clearly imbalanced (`--balance-abs-threshold` and
 * `--balance-rel-threshold`, shared with cache_aware) the least loaded candidate wins instead.
 * Candidates that are not prefill workers (a per-model label outside PD) get a uniform random
 * pick, as in SMG, where only the prefill leg gets buckets.
 *
 * Departures from SMG, each avoiding a flaw of its bucket policy:
 * - every (re-)split covers [0, 4096); SMG splits [0, usize::MAX) after the first one, so
 *   its first worker takes every realistic size until the next adaptation;
 * - a removed worker leaves the ranges at once (they are re-split over the rest, and the next
 *   adaptation is not held back by the 2× rule; the same when a worker joins);
 * - a range owner that is not a candidate (unavailable) falls back to the least loaded candidate
 *   instead of failing the request;
 * - the window expires by time whenever it is read (each request, each adaptation), so an idle
 *   period does not leave stale totals; adaptation runs lazily inside `select`, no timer;
 * - the imbalance test looks at the candidates' totals only, so an unavailable worker's empty
 *   total does not make every request "imbalanced";
 * - ties for least loaded go to the first candidate in order (SMG: map iteration order).
 *
 * Known gaps: a model's (small) state is kept for as long as the policy lives. Kept from SMG's
 * algorithm as specified: one size is never split between workers (traffic of a few distinct
 * sizes piles into one range until the imbalance override), and ranges drawn from one window's
 * sample stay until the load changes 2×, so at high rates round robin is about as even
 * (tests/policies/bucket_test.ts has the figures).
 */

import { randomIndex } from "../core/clock.ts";
import type { RouteRequest, WorkerView } from "../core/types.ts";
import type { Policy, PolicyNeeds } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";

/**
 * How often the ranges adapt, and the length of the window they adapt to. SMG's CLI hard-codes
 * 5 s (only its Python launcher has a flag), so this build adds no flag either.
 */
export const BUCKET_ADJUST_INTERVAL_MS = 5000;

/** The initial ranges split [0, INITIAL_MAX_SIZE) evenly. */
const INITIAL_MAX_SIZE = 4096;

/** One worker's range of request sizes, `lo..hi` inclusive; `hi` is Infinity for the last. */
export interface BucketRange {
  /** Worker id. */
  readonly worker: string;
  /** Smallest size in the range. */
  readonly lo: number;
  /** Largest size in the range (Infinity: open-ended). */
  readonly hi: number;
}

/** A worker's share of the window; detached (no longer in `slots`) once the worker is removed. */
interface Slot {
  readonly id: string;
  total: number;
  /** The select call (epoch) that last saw it among the candidates, and at which index. */
  mark: number;
  index: number;
}

/** One routed request, kept until it leaves the window. */
interface Routed {
  readonly at: number;
  readonly size: number;
  readonly slot: Slot;
}

/** The state of one model. */
interface ModelBuckets {
  /** Known workers in the order they were first seen (range order). */
  workers: string[];
  readonly slots: Map<string, Slot>;
  ranges: BucketRange[];
  /** Requests routed in the window, oldest first, from index `head`. */
  window: Routed[];
  head: number;
  /** Sum of the sizes in the window. */
  total: number;
  /** Per-bucket load at the last adaptation; 0 forces the next one. */
  bucketLoad: number;
  nextAdjustAt: number;
}

/** Size-range routing for the PD prefill leg. */
export class BucketPolicy implements Policy {
  readonly name = "bucket";
  readonly needs: PolicyNeeds = { requestText: true, backendLoads: false };
  readonly #deps: PolicyDeps;
  readonly #absThreshold: number;
  readonly #relThreshold: number;
  readonly #models = new Map<string, ModelBuckets>();
  #epoch = 0;

  /** Reads the balance thresholds from `deps.config.cacheAware`. */
  constructor(deps: PolicyDeps) {
    this.#deps = deps;
    this.#absThreshold = deps.config.cacheAware.balanceAbsThreshold;
    this.#relThreshold = deps.config.cacheAware.balanceRelThreshold;
  }

  select<W extends WorkerView>(candidates: readonly W[], request: RouteRequest): W | null {
    const n = candidates.length;
    if (n === 0) return this.#decided(null, "no_candidates");
    if (candidates[0].type !== "prefill") {
      return this.#decided(candidates[randomIndex(this.#deps.random, n)], "random");
    }
    const now = this.#deps.now();
    const model = request.model ?? "unknown";
    const b = this.#model(model, now);
    expire(b, now);
    // One pass: join unseen workers, mark the candidates, find the least loaded and the spread.
    const epoch = ++this.#epoch;
    let least: Slot | null = null;
    let min = Infinity;
    let max = -Infinity;
    let joined = false;
    for (let i = 0; i < n; i++) {
      const id = candidates[i].id;
      let slot = b.slots.get(id);
      if (!slot) {
        b.slots.set(id, slot = { id, total: 0, mark: 0, index: 0 });
        b.workers.push(id);
        joined = true;
      }
      slot.mark = epoch;
      slot.index = i;
      if (slot.total < min) {
        min = slot.total;
        least = slot;
      }
      if (slot.total > max) max = slot.total;
    }
    if (joined) split(b);
    if (now >= b.nextAdjustAt) {
      b.nextAdjustAt = now + BUCKET_ADJUST_INTERVAL_MS;
      if (adapt(b)) this.#logRanges(model, b);
    }

    const size = request.tokens?.length ?? request.text.length;
    let slot = least!;
    let branch = "imbalanced";
    if (!(max - min > this.#absThreshold && max > this.#relThreshold * min)) {
      const owner = b.slots.get(ownerOf(b.ranges, size));
      if (owner?.mark === epoch) {
        slot = owner;
        branch = "range";
      } else {
        branch = "fallback";
      }
    }
    slot.total += size;
    b.window.push({ at: now, size, slot });
    b.total += size;
    return this.#decided(candidates[slot.index], branch);
  }

  onWorkerRemoved(workerId: string): void {
    for (const b of this.#models.values()) {
      if (!b.slots.delete(workerId)) continue;
      b.workers = b.workers.filter((id) => id !== workerId);
      split(b);
    }
  }

  /** A model's current ranges in worker order (empty for a model not seen yet). */
  ranges(model: string): readonly BucketRange[] {
    return [...(this.#models.get(model)?.ranges ?? [])];
  }

  #model(model: string, now: number): ModelBuckets {
    let b = this.#models.get(model);
    if (!b) {
      b = {
        workers: [],
        slots: new Map(),
        ranges: [],
        window: [],
        head: 0,
        total: 0,
        bucketLoad: 0,
        nextAdjustAt: now + BUCKET_ADJUST_INTERVAL_MS,
      };
      this.#models.set(model, b);
    }
    return b;
  }

  #decided<W>(pick: W, branch: string): W {
    this.#deps.observer?.decision(this.name, branch);
    return pick;
  }

  #logRanges(model: string, b: ModelBuckets): void {
    const log = this.#deps.log;
    if (!log.enabled("debug")) return;
    log.debug("bucket ranges adapted", {
      model,
      perBucket: b.bucketLoad,
      ranges: b.ranges.map((r) => `${r.worker}:${r.lo}-${r.hi === Infinity ? "max" : r.hi}`),
    });
  }
}

/** Even split of [0, INITIAL_MAX_SIZE) over the known workers; the next adaptation is forced. */
function split(b: ModelBuckets): void {
  const n = b.workers.length;
  const gap = Math.max(1, Math.floor(INITIAL_MAX_SIZE / n));
  b.ranges = b.workers.map((worker, i) => ({
    worker,
    lo: i * gap,
    hi: i === n - 1 ? Infinity : (i + 1) * gap - 1,
  }));
  b.bucketLoad = 0;
}

/** Drops the requests older than the window from the totals. */
function expire(b: ModelBuckets, now: number): void {
  const w = b.window;
  let h = b.head;
  while (h < w.length && now - w[h].at > BUCKET_ADJUST_INTERVAL_MS) {
    w[h].slot.total -= w[h].size;
    b.total -= w[h].size;
    h++;
  }
  if (h === w.length) {
    b.window = [];
    h = 0;
  } else if (h > 1024 && h * 2 > w.length) {
    b.window = w.slice(h);
    h = 0;
  }
  b.head = h;
}

/**
 * Re-draws the ranges from the window's sizes when the per-bucket load (window total / workers)
 * moved by more than 2× since the last adaptation, or none happened since the last split.
 * Returns whether the ranges changed.
 */
function adapt(b: ModelBuckets): boolean {
  const n = b.workers.length;
  if (b.head === b.window.length || n === 0) return false;
  const perBucket = Math.floor(b.total / n);
  const old = b.bucketLoad;
  if (old !== 0 && perBucket <= 2 * old && old <= 2 * perBucket) return false;
  b.bucketLoad = perBucket;
  const hist = new Float64Array(b.window.length - b.head);
  for (let i = b.head; i < b.window.length; i++) hist[i - b.head] = b.window[i].size;
  b.ranges = adaptedRanges(b.workers, hist.sort(), perBucket);
  return true;
}

/**
 * SMG's boundary walk: each worker but the last takes ascending sizes until they add up to
 * `perBucket`; its range ends at the size that crossed, or spans `perBucket` past the previous
 * end when that size is not above it or the sizes ran out. The last range is open-ended.
 */
function adaptedRanges(
  workers: readonly string[],
  sortedSizes: ArrayLike<number>,
  perBucket: number,
): BucketRange[] {
  const out: BucketRange[] = [];
  let lo = 0;
  let idx = 0;
  for (let i = 0; i < workers.length; i++) {
    if (i === workers.length - 1) {
      out.push({ worker: workers[i], lo, hi: Infinity });
      break;
    }
    let sum = 0;
    let crossed = -1;
    while (idx < sortedSizes.length) {
      const v = sortedSizes[idx++];
      sum += v;
      if (sum >= perBucket) {
        crossed = v;
        break;
      }
    }
    const hi = crossed > lo ? crossed : lo + perBucket;
    out.push({ worker: workers[i], lo, hi });
    lo = hi + 1;
  }
  return out;
}

/** The worker whose range holds `size` (ranges are contiguous from 0, the last open-ended). */
function ownerOf(ranges: readonly BucketRange[], size: number): string {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ranges[mid].lo <= size) lo = mid;
    else hi = mid - 1;
  }
  return ranges[lo].worker;
}
