/**
 * The replicated key-value store under the mesh's durable namespaces (workers, pins): per key
 * last-writer-wins by version (Lamport clock, then replica id), removals kept as tombstones so a
 * delayed older write cannot bring a value back, and a change log ordered by a local sequence
 * number, so a peer's sender asks "what changed since seq N" without scanning the store.
 * `collect` drops tombstones older than a grace period that the caller says every peer holds;
 * the versions it dropped are remembered for one more grace period (a late copy of one, or of
 * an older write of that key, is refused as `collected`), after which their namespace's
 * *horizon* (the highest clock collected) refuses any op at or below it for a key this store
 * does not hold (`below_horizon`): such an op was written by a router that had not seen the
 * collected removals (one that missed them, or one that just started and has not caught up
 * with the clock), and may be a removed value coming back. The caller tells the sender: a
 * writer rewrites its own write past the refuser's clock, a router holding a copy of a
 * `collected` key drops it (`forget`), as it drops a tombstone the refuser already collected
 * (`dropCollected`). Bounded: values over `maxValueBytes`,
 * keys over `maxKeyLength`, new keys past `maxKeys` per namespace, namespaces outside the allowed
 * set and clocks far ahead of ours are refused (and counted by the caller). Pure data
 * structure: no I/O, time passed in.
 */

import { compareVersions, type Version } from "./version.ts";

/** One write, as it travels between routers. */
export interface Op extends Version {
  /** Namespace, e.g. `workers`. */
  ns: string;
  /** Key within the namespace. */
  key: string;
  /** The value, or null for a removal (tombstone). */
  value: Uint8Array | null;
}

/** A stored write and when this router learned it. */
export interface Entry extends Op {
  /** Local sequence number of the change that stored it. */
  seq: number;
  /** Local time it was stored (for tombstone collection). */
  storedAt: number;
}

/** Why a write was not stored. */
export type Refusal =
  | "too_large"
  | "too_many_keys"
  | "stale"
  | "bad_clock"
  | "unknown_namespace"
  | "collected"
  | "below_horizon";

/** Highest Lamport clock accepted: far below 2^53, so ticking can never lose precision. */
export const MAX_CLOCK = 2 ** 50;

/** A peer's clock may run at most this far ahead of ours (a hostile op cannot exhaust it). */
const MAX_CLOCK_JUMP = 2 ** 32;

/** Limits of one store. */
export interface StoreLimits {
  /** Largest value in bytes (default 1 MiB). */
  maxValueBytes: number;
  /** Most keys per namespace, tombstones included (default 1,000,000). */
  maxKeys: number;
  /** Longest key in characters (default 1024). */
  maxKeyLength: number;
  /** Namespaces accepted; others are refused (default: any). */
  namespaces: ReadonlySet<string> | null;
}

/** A change, as subscribers see it. */
export type ChangeListener = (e: Entry, origin: "local" | "remote") => void;

/** The store of one router. */
export class LwwStore {
  /** This router process's replica id. */
  readonly replica: string;
  readonly #limits: StoreLimits;
  #clock = 0;
  #seq = 0;
  readonly #entries = new Map<string, Entry>();
  readonly #counts = new Map<string, { live: number; tombstones: number }>();
  /** [seq, id] in seq order; stale records (superseded or collected) are skipped and compacted. */
  #log: { seq: number; id: string }[] = [];
  readonly #listeners: ChangeListener[] = [];
  /** Collected tombstones' versions, by key id, until `until`. */
  readonly #collected = new Map<string, Version & { until: number }>();
  /** Per namespace, the highest clock of a collected tombstone no longer remembered. */
  readonly #horizon = new Map<string, number>();

  /** An empty store for `replica`. */
  constructor(replica: string, limits: Partial<StoreLimits> = {}) {
    this.replica = replica;
    this.#limits = {
      maxValueBytes: 1 << 20,
      maxKeys: 1_000_000,
      maxKeyLength: 1024,
      namespaces: null,
      ...limits,
    };
  }

  /** The Lamport clock. */
  get clock(): number {
    return this.#clock;
  }

  /** The last local sequence number. */
  get seq(): number {
    return this.#seq;
  }

  /** Subscribes to stored changes. */
  onChange(fn: ChangeListener): void {
    this.#listeners.push(fn);
  }

  /** The live value of `key`, if any. */
  get(ns: string, key: string): Uint8Array | undefined {
    return this.#entries.get(id(ns, key))?.value ?? undefined;
  }

  /** The stored entry (live or tombstone) of `key`. */
  entry(ns: string, key: string): Entry | undefined {
    return this.#entries.get(id(ns, key));
  }

  /** Live keys and values of a namespace. */
  *live(ns: string): Generator<[string, Uint8Array]> {
    for (const e of this.#entries.values()) {
      if (e.ns === ns && e.value !== null) yield [e.key, e.value];
    }
  }

  /** Every entry, tombstones included. */
  all(): IterableIterator<Entry> {
    return this.#entries.values();
  }

  /** Live and tombstone counts per namespace. */
  counts(): Map<string, { live: number; tombstones: number }> {
    return this.#counts;
  }

  /** Writes `value` (null removes) as this replica at a new clock; returns the op, or why not. */
  write(ns: string, key: string, value: Uint8Array | null, now: number): Op | Refusal {
    const current = this.#entries.get(id(ns, key));
    if (value === null && (!current || current.value === null)) return "stale";
    const op: Op = { ns, key, value, clock: this.#clock + 1, replica: this.replica };
    const r = this.#store(op, now, "local");
    return r === "applied" ? op : r;
  }

  /** Applies a peer's op; the clock moves past any op not refused for its clock. */
  apply(op: Op, now: number): "applied" | Refusal {
    if (
      !Number.isSafeInteger(op.clock) || op.clock < 0 || op.clock > MAX_CLOCK ||
      op.clock > this.#clock + MAX_CLOCK_JUMP
    ) {
      return "bad_clock";
    }
    this.#clock = Math.max(this.#clock, op.clock);
    return this.#store(op, now, "remote");
  }

  /** Entries changed after local seq `since`, oldest change first. */
  *changesSince(since: number): Generator<Entry> {
    const log = this.#log;
    let lo = 0;
    let hi = log.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (log[mid].seq <= since) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < log.length; i++) {
      const e = this.#entries.get(log[i].id);
      if (e && e.seq === log[i].seq) yield e;
    }
  }

  /**
   * Forgets tombstones stored more than `graceMs` ago that `everyoneHas` confirms every peer
   * holds (so no peer can send the older live value back as news). Returns how many went.
   */
  collect(now: number, graceMs: number, everyoneHas: (e: Entry) => boolean): number {
    for (const [k, c] of this.#collected) {
      if (now < c.until) continue;
      this.#collected.delete(k);
      const ns = k.slice(0, k.indexOf("\u0000"));
      this.#horizon.set(ns, Math.max(this.#horizon.get(ns) ?? 0, c.clock));
    }
    let n = 0;
    for (const [k, e] of this.#entries) {
      if (e.value !== null || now - e.storedAt < graceMs || !everyoneHas(e)) continue;
      this.#entries.delete(k);
      this.#collected.set(k, { clock: e.clock, replica: e.replica, until: now + graceMs });
      this.#count(e.ns, "tombstones", -1);
      n++;
    }
    if (n > 0) this.#compact();
    return n;
  }

  /** The clock at or below which ops for keys not held are refused in `ns` (0: none). */
  horizon(ns: string): number {
    return this.#horizon.get(ns) ?? 0;
  }

  /** Moves the clock to at least `clock` (a peer's, so that the next write passes its horizon). */
  observe(clock: number): void {
    if (
      Number.isSafeInteger(clock) && clock > this.#clock && clock <= this.#clock + MAX_CLOCK_JUMP
    ) {
      this.#clock = Math.min(clock, MAX_CLOCK);
    }
  }

  /**
   * Drops a tombstone at version `v` or older that a peer already collected, remembering it as
   * collected here too for `graceMs` (so this store stops sending it). Returns whether it did.
   */
  dropCollected(ns: string, key: string, v: Version, now: number, graceMs: number): boolean {
    const k = id(ns, key);
    const e = this.#entries.get(k);
    if (!e || e.value !== null || compareVersions(e, v) > 0) return false;
    this.#entries.delete(k);
    this.#collected.set(k, { clock: v.clock, replica: v.replica, until: now + graceMs });
    this.#count(ns, "tombstones", -1);
    this.#compact();
    return true;
  }

  /**
   * Drops a live entry at exactly version `v` without leaving a tombstone (a peer refused it
   * as older than its collection: the removal it missed was collected); listeners hear a
   * removal. Returns whether it was dropped.
   */
  forget(ns: string, key: string, v: Version): boolean {
    const k = id(ns, key);
    const e = this.#entries.get(k);
    if (!e || e.value === null || compareVersions(e, v) !== 0) return false;
    this.#entries.delete(k);
    this.#count(ns, "live", -1);
    this.#compact();
    const gone: Entry = { ...e, value: null };
    for (const l of this.#listeners) l(gone, "remote");
    return true;
  }

  #store(op: Op, now: number, origin: "local" | "remote"): "applied" | Refusal {
    const l = this.#limits;
    if (l.namespaces && !l.namespaces.has(op.ns)) return "unknown_namespace";
    if (op.value !== null && op.value.length > l.maxValueBytes) return "too_large";
    if (op.key.length > l.maxKeyLength) return "too_large";
    const k = id(op.ns, op.key);
    const current = this.#entries.get(k);
    if (current && compareVersions(op, current) <= 0) return "stale";
    if (!current && origin === "remote") {
      const c = this.#collected.get(k);
      if (c) {
        if (compareVersions(op, c) <= 0) return "collected";
      } else if (op.clock <= (this.#horizon.get(op.ns) ?? 0)) return "below_horizon";
    }
    if (
      !current && (this.#counts.get(op.ns)?.live ?? 0) +
            (this.#counts.get(op.ns)?.tombstones ?? 0) >= this.#limits.maxKeys
    ) {
      return "too_many_keys";
    }
    if (origin === "local") this.#clock = op.clock;
    const e: Entry = { ...op, seq: ++this.#seq, storedAt: now };
    if (current) this.#count(op.ns, current.value === null ? "tombstones" : "live", -1);
    this.#count(op.ns, op.value === null ? "tombstones" : "live", 1);
    this.#entries.set(k, e);
    this.#log.push({ seq: e.seq, id: k });
    if (this.#log.length > 64 && this.#log.length > 2 * this.#entries.size) this.#compact();
    for (const l of this.#listeners) l(e, origin);
    return "applied";
  }

  #count(ns: string, what: "live" | "tombstones", d: number): void {
    let c = this.#counts.get(ns);
    if (!c) this.#counts.set(ns, c = { live: 0, tombstones: 0 });
    c[what] += d;
  }

  #compact(): void {
    this.#log = this.#log.filter((r) => this.#entries.get(r.id)?.seq === r.seq);
  }
}

function id(ns: string, key: string): string {
  return `${ns}\u0000${key}`;
}
