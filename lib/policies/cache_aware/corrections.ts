/**
 * What a tree correction (tree feedback) leaves behind so the mesh cannot undo it: the hashes of
 * the paths it forgot (the placements that still name the worker there), a tombstone per
 * correction that keeps repairs from re-inserting the stale branch, and a log of tree stamps by
 * time so that a correction from a peer forgets only what was recorded before the request that
 * revealed it was routed.
 *
 * Ordering against repairs: a repair entry carries no time, so a router cannot tell a peer's
 * stale copy of the branch from a newer one. For `CORRECTION_TTL_MS` after a correction, a
 * repaired path through its branch is recorded for the worker only up to the kept depth, and a
 * repaired placement among its hashes not at all; a new decision still reaches peers as a delta,
 * which is never filtered. Repairs also carry the live corrections (tombstones) of the tree, so a
 * router that missed one (a lost batch, a partition) applies it when it copies a peer's tree.
 * Known gaps: past the TTL a peer that never applied a correction can spread its stale branch
 * again; a path repaired into a router between the request and the correction's arrival is newer
 * by stamp and kept (its placement is dropped by hash).
 */

import type { TreeCorrection } from "../replicas.ts";
import { pathHashes, type TreeKind } from "./shared_paths.ts";

/** How long a correction keeps repairs from re-inserting its branch (10 minutes). */
export const CORRECTION_TTL_MS = 10 * 60_000;

/** Corrections a model's tree kind remembers; the oldest go first. */
export const MAX_TOMBSTONES = 256;

/** Branch units and hashes a model's tree kind remembers in all (4 Mi); the oldest go first. */
export const MAX_TOMBSTONE_UNITS = 1 << 22;

/** Most placement hashes one correction names. */
export const MAX_CORRECTION_HASHES = 4096;

/** The stamp log keeps a sample at most this often (newest excepted). */
const SAMPLE_MS = 500;

/** Samples the stamp log keeps (about 17 minutes at one per `SAMPLE_MS`). */
const MAX_SAMPLES = 2048;

/**
 * The branch a correction names for `key` (see `TreeCorrection.branch`) and the depth kept: the
 * worker's `held` units, rounded down to a page for token ids. Text never ends inside a surrogate
 * pair (it must travel as valid UTF-16).
 */
export function branchOf(
  key: string | readonly number[],
  held: number,
  block: number,
): { branch: string | readonly number[]; kept: number } {
  if (typeof key !== "string") {
    const kept = held - held % block;
    return { branch: key.slice(0, kept + block), kept };
  }
  const high = (key.charCodeAt(held) & 0xfc00) === 0xd800;
  return { branch: key.slice(0, held + (high ? 2 : 1)), kept: held };
}

/**
 * A `forgetBeyond` listener that adds to `into` the path hashes (`pathHashes` at `block`) of each
 * forgotten path past the depth it is forgotten from, up to `MAX_CORRECTION_HASHES`.
 */
export function staleHashes(
  block: number,
  into: Set<number>,
): (path: string | readonly number[], from: number) => void {
  return (path, from) => {
    if (into.size >= MAX_CORRECTION_HASHES) return;
    const hashes = pathHashes(path, block);
    for (let i = Math.floor(from / block); i < hashes.length; i++) {
      into.add(hashes[i]);
      if (into.size >= MAX_CORRECTION_HASHES) return;
    }
  };
}

/** Whether `path` starts with `prefix`. */
function startsWith(path: string | readonly number[], prefix: string | readonly number[]): boolean {
  if (path.length < prefix.length || typeof path !== typeof prefix) return false;
  if (typeof path === "string") return path.substring(0, prefix.length) === prefix;
  for (let i = 0; i < prefix.length; i++) {
    if (path[i] !== (prefix as readonly number[])[i]) return false;
  }
  return true;
}

interface Tombstone {
  correction: TreeCorrection;
  hashes: Set<number>;
  /** What it costs against `MAX_TOMBSTONE_UNITS`. */
  units: number;
  /** Local time up to which the worker's records on the branch were stale. */
  since: number;
  expires: number;
}

/**
 * The corrections of one model's tree kind, remembered for `CORRECTION_TTL_MS`, at most
 * `MAX_TOMBSTONES` of them and `MAX_TOMBSTONE_UNITS` of branches and hashes.
 */
export class Tombstones {
  /** Oldest first (so also by expiry). */
  #list: Tombstone[] = [];
  readonly #ids = new Set<string>();
  /** Tombstones per worker, to skip the scan for the others. */
  readonly #workers = new Map<string, number>();
  #units = 0;

  /** Whether correction `id` is remembered. */
  has(id: string): boolean {
    return this.#ids.has(id);
  }

  /** Remembers `c` as applied at `now`, with the placements it dropped. */
  record(c: TreeCorrection, hashes: Iterable<number>, now: number): void {
    this.#sweep(now);
    if (this.#ids.has(c.id)) return;
    const set = new Set(hashes);
    const units = (c.branch?.length ?? 0) + set.size;
    let n = 0;
    for (let left = this.#units + units; n < this.#list.length; n++) {
      if (this.#list.length - n < MAX_TOMBSTONES && left <= MAX_TOMBSTONE_UNITS) break;
      left -= this.#list[n].units;
    }
    if (n > 0) this.#drop(n);
    this.#list.push({
      correction: c,
      hashes: set,
      units,
      since: now - c.ageMs,
      expires: now + CORRECTION_TTL_MS,
    });
    this.#units += units;
    this.#ids.add(c.id);
    this.#workers.set(c.worker, (this.#workers.get(c.worker) ?? 0) + 1);
  }

  /**
   * Units of a repaired `path` that may be recorded for `worker`: all of it, or the depth a
   * correction kept when the path runs through its branch.
   */
  admitted(path: string | readonly number[], worker: string, now: number): number {
    let n = path.length;
    if (!this.#any(worker, now)) return n;
    for (const { correction: c } of this.#list) {
      if (c.worker === worker && c.branch !== null && c.kept < n && startsWith(path, c.branch)) {
        n = c.kept;
      }
    }
    return n;
  }

  /** Whether a repaired placement of `hash` may name `worker`. */
  admits(hash: number, worker: string, now: number): boolean {
    if (!this.#any(worker, now)) return true;
    return !this.#list.some((t) => t.correction.worker === worker && t.hashes.has(hash));
  }

  /** The live corrections, their ages as of `now` and with every placement they dropped here. */
  live(now: number): TreeCorrection[] {
    this.#sweep(now);
    return this.#list.map((t) => ({
      ...t.correction,
      hashes: [...t.hashes],
      ageMs: Math.max(0, now - t.since),
    }));
  }

  #any(worker: string, now: number): boolean {
    if (this.#list.length === 0) return false;
    this.#sweep(now);
    return this.#workers.has(worker);
  }

  #sweep(now: number): void {
    let n = 0;
    while (n < this.#list.length && this.#list[n].expires <= now) n++;
    if (n > 0) this.#drop(n);
  }

  /** Forgets the `n` oldest. */
  #drop(n: number): void {
    for (const { correction: c, units } of this.#list.slice(0, n)) {
      this.#units -= units;
      this.#ids.delete(c.id);
      const left = this.#workers.get(c.worker)! - 1;
      if (left === 0) this.#workers.delete(c.worker);
      else this.#workers.set(c.worker, left);
    }
    this.#list = this.#list.slice(n);
  }
}

/**
 * Tree stamps by time, for one model: sample i says every stamp up to `text[i]` (`tokens[i]`)
 * was given at or before `times[i]`. Recorded after changes, at most one sample per `SAMPLE_MS`
 * besides the newest; the oldest are dropped past `MAX_SAMPLES`.
 */
export class StampLog {
  #times: number[] = [];
  #text: number[] = [];
  #tokens: number[] = [];

  /** The trees' stamps are `text` and `tokens` at `now`. */
  record(now: number, text: number, tokens: number): void {
    const n = this.#times.length;
    if (n > 0 && now <= this.#times[n - 1]) {
      this.#text[n - 1] = text;
      this.#tokens[n - 1] = tokens;
      return;
    }
    // The newest sample stands in for its stretch until the next one is `SAMPLE_MS` past it.
    if (n > 1 && this.#times[n - 1] - this.#times[n - 2] < SAMPLE_MS) {
      this.#times[n - 1] = now;
      this.#text[n - 1] = text;
      this.#tokens[n - 1] = tokens;
      return;
    }
    this.#times.push(now);
    this.#text.push(text);
    this.#tokens.push(tokens);
    if (n + 1 > MAX_SAMPLES) {
      const cut = MAX_SAMPLES >> 2;
      this.#times = this.#times.slice(cut);
      this.#text = this.#text.slice(cut);
      this.#tokens = this.#tokens.slice(cut);
    }
  }

  /**
   * A stamp below which everything `kind`'s tree stamped was stamped at or before `t`: what a
   * correction of the branch from then may forget (0, nothing, when `t` precedes the log).
   */
  before(kind: TreeKind, t: number): number {
    let lo = 0;
    let hi = this.#times.length; // the first sample after `t`
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#times[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return 0;
    return (kind === "string" ? this.#text : this.#tokens)[lo - 1] + 1;
  }
}
