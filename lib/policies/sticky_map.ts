/**
 * The routing key → worker pin map shared by `manual` and sticky sessions. In: a map key (model
 * and routing key, see `stickyMapKey`), the eligible candidates and the time; out: whether the
 * key is pinned to one of them (`pinned`), pinned only to unavailable workers (`stale`), or not
 * pinned (`vacant`). Each entry remembers at most two workers by id, primary first.
 *
 * Time is an input (`now`, clock ms), so the map is pure bookkeeping: no timers; the owning
 * policy calls `sweepIfDue` from `select` instead of running a sweeper task. Idle expiry is
 * exact: `peek` treats an entry idle for `maxIdleSecs` or more as vacant even before a sweep,
 * and `sweep` only reclaims memory. Entries are kept in access order (a touch moves an entry to
 * the back), so a sweep stops at the first live entry and costs O(expired), assuming a
 * monotonic clock (the gateway's is). SMG keys the map by routing key alone, so a key used
 * for two models re-pins on every switch; `stickyMapKey` scopes keys by model. SMG's map is
 * unbounded; this one drops the least recently used entry past `maxEntries`.
 *
 * Entries name workers by `refOf` (the policies use URLs, what every router of a mesh knows a
 * worker by). `sharePins` connects a map to the mesh: each change of a key's workers (not a
 * mere use) is published, and a peer's change replaces the local entry (`applyRemote`), so a
 * key maps to the same worker on every router; idle expiry stays local.
 */

import type { WorkerView } from "../core/types.ts";
import type { Policy } from "./policy.ts";
import type { PolicyDeps } from "./policy_deps.ts";
import { pinScope } from "./replicas.ts";

/** Workers remembered per key (primary first), as in SMG. */
export const MAX_PINNED_WORKERS = 2;

/** Default bound on keys held; past it the least recently used key is forgotten. */
export const DEFAULT_MAX_ENTRIES = 1_000_000;

/** What the map knows about a key among the current candidates. */
export type PinState<W> =
  | { kind: "pinned"; worker: W }
  | { kind: "stale" }
  | { kind: "vacant" };

/** Map options. */
export interface StickyMapOptions {
  /** A key idle this long is forgotten; 0 never (`--max-idle-secs`, 14400). */
  maxIdleSecs: number;
  /** Seconds between lazy sweeps by `sweepIfDue`; 0 never (`--eviction-interval`, 120). */
  evictionIntervalSecs?: number;
  /** Keys held at most; the least recently used goes first (default 1,000,000). */
  maxEntries?: number;
  /** What names a worker in an entry (default its id). */
  refOf?: (w: WorkerView) => string;
  /** Hears each change of a key's workers made here (not `applyRemote`'s); default none. */
  onPinned?: (key: string, refs: readonly string[]) => void;
  /** Hears each use of a pinned key (`peek` finding it); default none. */
  onUsed?: (key: string, refs: readonly string[]) => void;
}

interface Entry {
  /** Worker ids, primary first, at most MAX_PINNED_WORKERS. */
  ids: string[];
  /** Clock ms of the last use. */
  lastAccess: number;
}

/** The model a map key (`stickyMapKey`) is scoped by, or null when malformed. */
export function modelOfMapKey(mapKey: string): string | null {
  const colon = mapKey.indexOf(":");
  const n = Number(mapKey.slice(0, colon));
  if (colon < 1 || !Number.isSafeInteger(n) || n < 0 || colon + 1 + n > mapKey.length) return null;
  return mapKey.slice(colon + 1, colon + 1 + n);
}

/** The map key for `key` under `model`: keys are scoped by model (length-prefixed, unambiguous). */
export function stickyMapKey(model: string | null, key: string): string {
  const m = model ?? "";
  return `${m.length}:${m}${key}`;
}

/** Routing key → pinned workers, with idle expiry and an LRU bound. */
export class StickyMap {
  readonly #entries = new Map<string, Entry>();
  readonly #maxIdleMs: number;
  readonly #maxEntries: number;
  readonly #intervalMs: number;
  readonly #refOf: (w: WorkerView) => string;
  readonly #onPinned: (key: string, refs: readonly string[]) => void;
  readonly #onUsed: ((key: string, refs: readonly string[]) => void) | null;
  /** Refs of the workers pinned through a view, by id (for `forgetWorker`). */
  readonly #refById = new Map<string, string>();
  #lastSweep: number | null = null;

  /** A map with the given expiry and bound. */
  constructor(opts: StickyMapOptions) {
    this.#maxIdleMs = opts.maxIdleSecs * 1000;
    this.#intervalMs = (opts.evictionIntervalSecs ?? 0) * 1000;
    this.#maxEntries = opts.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.#refOf = opts.refOf ?? ((w) => w.id);
    this.#onPinned = opts.onPinned ?? (() => {});
    this.#onUsed = opts.onUsed ?? null;
  }

  /** Keys held (expired ones not yet swept included). */
  get size(): number {
    return this.#entries.size;
  }

  /** The pinned worker ids of `key`, primary first, or undefined when not pinned (for tests and logs). */
  pinsOf(key: string): readonly string[] | undefined {
    return this.#entries.get(key)?.ids;
  }

  /** The last access time of `key`, or undefined. */
  lastAccessOf(key: string): number | undefined {
    return this.#entries.get(key)?.lastAccess;
  }

  /**
   * The first pinned worker of `key` that is among `candidates`; `stale` when the key is
   * pinned only elsewhere; `vacant` when not pinned or expired. Refreshes the key's access time.
   */
  peek<W extends WorkerView>(key: string, candidates: readonly W[], now: number): PinState<W> {
    const e = this.#live(key, now);
    if (e === undefined) return { kind: "vacant" };
    this.#refresh(key, e, now);
    this.#onUsed?.(key, e.ids);
    for (const id of e.ids) {
      for (const c of candidates) if (this.#refOf(c) === id) return { kind: "pinned", worker: c };
    }
    return { kind: "stale" };
  }

  /**
   * Makes `worker` (a view, or its ref) the primary of `key` (moving it if present), keeping
   * at most two; creates the entry.
   */
  pinFront(key: string, worker: WorkerView | string, now: number): void {
    const id = this.#ref(worker);
    const e = this.#live(key, now);
    if (e === undefined) return this.#insert(key, [id], now);
    const ids = [id, ...e.ids.filter((x) => x !== id)];
    this.#change(key, e, ids.slice(0, MAX_PINNED_WORKERS));
    this.#refresh(key, e, now);
  }

  /** Appends `worker` (a view, or its ref) to `key`'s workers, dropping the oldest past two; creates the entry. */
  push(key: string, worker: WorkerView | string, now: number): void {
    const id = this.#ref(worker);
    const e = this.#live(key, now);
    if (e === undefined) return this.#insert(key, [id], now);
    const ids = [...e.ids.filter((x) => x !== id), id];
    this.#change(key, e, ids.slice(-MAX_PINNED_WORKERS));
    this.#refresh(key, e, now);
  }

  /** Sets `key`'s workers as a peer decided them, marking it used at `now`; not published. */
  applyRemote(key: string, refs: readonly string[], now: number): void {
    const ids = refs.slice(0, MAX_PINNED_WORKERS);
    const e = this.#live(key, now);
    if (e === undefined) return this.#insert(key, ids, now, false);
    e.ids = ids;
    this.#refresh(key, e, now);
  }

  /** Whether `key` is held and not idle at `now`. */
  holds(key: string, now: number): boolean {
    const e = this.#entries.get(key);
    return e !== undefined && (this.#maxIdleMs <= 0 || now - e.lastAccess < this.#maxIdleMs);
  }

  /** Marks `key` used at `now`, if present. */
  touch(key: string, now: number): void {
    const e = this.#live(key, now);
    if (e !== undefined) this.#refresh(key, e, now);
  }

  /** Removes keys idle for `maxIdleSecs` or more (none when it is 0); returns how many. */
  sweep(now: number): number {
    if (this.#maxIdleMs <= 0) return 0;
    let removed = 0;
    for (const [key, e] of this.#entries) {
      if (now - e.lastAccess < this.#maxIdleMs) break; // access order: the rest are newer
      this.#entries.delete(key);
      removed++;
    }
    return removed;
  }

  /**
   * Sweeps when `evictionIntervalSecs` have passed since the last sweep (the first call only
   * starts the interval); the policies call it from `select`, so no timer is needed.
   */
  sweepIfDue(now: number): number {
    if (this.#intervalMs <= 0) return 0;
    if (this.#lastSweep === null) {
      this.#lastSweep = now;
      return 0;
    }
    if (now - this.#lastSweep < this.#intervalMs) return 0;
    this.#lastSweep = now;
    return this.sweep(now);
  }

  /** Drops worker `workerId` from every key (it left the registry); keys keep their other pins. */
  forgetWorker(workerId: string): void {
    const id = this.#refById.get(workerId) ?? workerId;
    this.#refById.delete(workerId);
    for (const e of this.#entries.values()) {
      const i = e.ids.indexOf(id);
      if (i >= 0) e.ids.splice(i, 1);
    }
  }

  /** The entry of `key` unless expired (an expired entry is deleted). */
  #live(key: string, now: number): Entry | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (this.#maxIdleMs > 0 && now - e.lastAccess >= this.#maxIdleMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return e;
  }

  #refresh(key: string, e: Entry, now: number): void {
    e.lastAccess = now;
    // Re-insert so iteration order stays access order (sweep and LRU rely on it).
    this.#entries.delete(key);
    this.#entries.set(key, e);
  }

  #ref(worker: WorkerView | string): string {
    if (typeof worker === "string") return worker;
    const ref = this.#refOf(worker);
    if (ref !== worker.id) this.#refById.set(worker.id, ref);
    return ref;
  }

  #change(key: string, e: Entry, ids: string[]): void {
    const same = ids.length === e.ids.length && ids.every((x, i) => x === e.ids[i]);
    e.ids = ids;
    if (!same) this.#onPinned(key, ids);
  }

  #insert(key: string, ids: string[], now: number, publish = true): void {
    if (this.#entries.size >= this.#maxEntries) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
    this.#entries.set(key, { ids, lastAccess: now });
    if (publish) this.#onPinned(key, ids);
  }
}

/**
 * A pin map of `scope` that names workers by URL and takes part in pin sync when the policies
 * have replicas (`deps.replicas`): its changes go to `pinSink`, its peers' come through
 * `applyPin`.
 */
export function sharedStickyMap(
  deps: PolicyDeps,
  kind: "sticky" | "manual",
  owner: Policy,
  opts: Omit<StickyMapOptions, "refOf" | "onPinned">,
): StickyMap {
  const r = deps.replicas;
  const scope = pinScope(kind, deps.role);
  const map = new StickyMap({
    ...opts,
    refOf: (w) => w.url,
    onPinned: r ? (key, refs) => r.pinSink?.(scope, key, refs) : undefined,
    onUsed: r ? (key, refs) => r.pinUsed?.(scope, key, refs) : undefined,
  });
  r?.addPins(scope, {
    applyPin: (key, urls) => map.applyRemote(key, urls, deps.now()),
    holds: (key) => map.holds(key, deps.now()),
  }, owner);
  return map;
}
