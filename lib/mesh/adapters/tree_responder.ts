/**
 * The answering side of cache-aware tree repair (`tree_requester.ts` asks, `tree_sync.ts` runs
 * both): a peer's request for one tree (role, model, kind) from a cursor is answered with pages
 * of at most `pageEntries` entries, about `pageBytes` bytes (paths front-coded against the
 * previous one) and `pageUnits` path units, built in slices of `sliceMs` of work so request
 * handling never waits long, and sent only while the stream to the requester holds fewer than
 * `maxQueued` frames. A newer request from the same peer for the same tree cancels the earlier
 * answer; at most two answers per peer and `maxResponses` in all run at once (more are refused:
 * the requester retries). The first page also carries the tree's remembered corrections (the
 * newest, within half of `pageUnits`), so a requester that missed one applies it.
 */

import type { PolicyReplicas, TreeCorrection, TreeEntry } from "../../policies/replicas.ts";
import type { Clock } from "../../core/clock.ts";
import type { StreamPort } from "../streams.ts";
import type { TreeCounter } from "./tree_sync_options.ts";
import * as codec from "./tree_codec.ts";

/** What the responder needs. */
export interface ResponderDeps {
  replicas: PolicyReplicas;
  clock: Clock;
  /** The streams (null before attach). */
  port: () => StreamPort | null;
  /** Whether answering `peer` still makes sense (its stream is open, the sync runs). */
  open: (peer: string) => boolean;
  count: (what: TreeCounter, n: number) => void;
  pageBytes: number;
  pageEntries: number;
  pageUnits: number;
  maxPathUnits: number;
  maxQueued: number;
  maxResponses: number;
  sliceMs: number;
  /** A page that finds no room this long is dropped (the requester retries). */
  progressMs: number;
}

/** Per-entry bytes a page spends besides the path (tenant indexes, tags, lengths). */
const ENTRY_OVERHEAD = 16;

/** A repair being answered. */
interface Job {
  /** Requester and tree. */
  key: string;
  peer: string;
  request: codec.RepairRequest;
  it: Iterator<TreeEntry>;
  /** Entries taken from the iterator (from the start of the tree). */
  consumed: number;
  /** Index of the next page. */
  index: number;
  /** The entry that did not fit the previous page (taken, not yet sent). */
  held: TreeEntry | null;
  /** Corrections for the first page. */
  corrections: TreeCorrection[];
  /** The page being filled: entries, estimated bytes, path units. */
  entries: TreeEntry[];
  bytes: number;
  units: number;
  /** The encoded page waiting for room on the stream. */
  page: Uint8Array | null;
  /** Whether the page filled last is the tree's last. */
  last: boolean;
  /** Give up sending `page` at this time. */
  deadline: number;
  /** A newer request for the same tree replaced this one. */
  cancelled: boolean;
}

/**
 * About the bytes an entry takes in a page after `prev` (an upper bound for text): its path is
 * front-coded against the previous one (`encodePage`).
 */
function entrySize(e: TreeEntry, prev: TreeEntry | null): number {
  const path = codec.pathOf(e);
  const before = prev === null ? null : codec.pathOf(prev);
  const shared = path !== null && before !== null && typeof path === typeof before
    ? codec.sharedPrefix(before, path)
    : 0;
  const units = path === null ? 8 : (path.length - shared) * (typeof path === "string" ? 3 : 5);
  return ENTRY_OVERHEAD + e.tenants.length * 2 + units;
}

/** About the bytes a correction takes in a page (an upper bound for text). */
function correctionSize(c: TreeCorrection): number {
  const units = c.branch === null ? 0 : c.branch.length * (typeof c.branch === "string" ? 3 : 5);
  return ENTRY_OVERHEAD * 2 + c.id.length + c.hashes.length * 9 + units;
}

/** Answers repair requests. */
export class TreeResponder {
  readonly #d: ResponderDeps;
  /** Repairs being answered, by requester and tree. */
  readonly #jobs = new Map<string, Job>();

  /** A responder over `d`. */
  constructor(d: ResponderDeps) {
    this.#d = d;
  }

  /** A repair request from `peer`. */
  onRequest(peer: string, payload: Uint8Array): void {
    const r = codec.decodeRequest(payload);
    if (!r.ok) return this.#d.count("requests_refused", 1);
    const { role, model, kind } = r.value;
    // A new request from a peer for a tree replaces its earlier one (a retry of the same repair).
    const key = `${peer}\u0000${codec.groupKey(role, model, kind)}`;
    const earlier = this.#jobs.get(key);
    if (earlier) earlier.cancelled = true;
    let mine = 0;
    for (const j of this.#jobs.values()) if (j.peer === peer && !j.cancelled) mine++;
    if (this.#jobs.size - (earlier ? 1 : 0) >= this.#d.maxResponses || mine >= 2) {
      this.#jobs.delete(key);
      return this.#d.count("requests_refused", 1);
    }
    const trees = this.#d.replicas.treesFor(role, model);
    const entries = trees ? trees.exportTree(model, kind) : [];
    const corrections = this.#fit(trees ? trees.corrections(model, kind) : []);
    const job: Job = {
      key,
      peer,
      request: r.value,
      it: entries[Symbol.iterator](),
      consumed: 0,
      index: 0,
      held: null,
      corrections,
      entries: [],
      bytes: corrections.reduce((n, c) => n + correctionSize(c), 0),
      units: corrections.reduce((n, c) => n + codec.correctionUnits(c), 0),
      page: null,
      last: false,
      deadline: 0,
      cancelled: false,
    };
    this.#jobs.set(key, job);
    this.#d.clock.after(0, () => this.#respond(job));
  }

  /** The newest of `corrections` that fit in half a page. */
  #fit(corrections: TreeCorrection[]): TreeCorrection[] {
    let units = 0;
    let bytes = 0;
    let i = corrections.length;
    while (i > 0) {
      const c = corrections[i - 1];
      units += codec.correctionUnits(c);
      bytes += correctionSize(c);
      if (units > this.#d.pageUnits / 2 || bytes > this.#d.pageBytes / 2) break;
      i--;
    }
    return corrections.slice(i);
  }

  /**
   * One slice of answering a repair: skips to the cursor, fills and sends pages, and comes back
   * through the clock after `sliceMs` of work, after each page, and while the stream to the
   * requester holds `maxQueued` frames or more (for at most the progress timeout), so pages
   * never crowd out deltas, store batches and heartbeats. Timer-driven, so it runs under fake
   * time too. A path longer than `maxPathUnits` is skipped (counted): it could not travel.
   */
  #respond(job: Job): void {
    const o = this.#d;
    const end = () => {
      if (this.#jobs.get(job.key) === job) this.#jobs.delete(job.key);
    };
    if (job.cancelled || !this.#d.open(job.peer)) return end();
    const start = performance.now();
    const later = (ms = 0) => void o.clock.after(ms, () => this.#respond(job));
    if (job.page === null) {
      while (job.consumed < job.request.cursor) {
        if ((job.consumed & 1023) === 1023 && performance.now() - start > o.sliceMs) {
          return later();
        }
        job.consumed++;
        if (job.it.next().done) {
          job.request.cursor = job.consumed = job.consumed - 1;
          break;
        }
      }
      for (let n = 1;; n++) {
        if ((n & 63) === 0 && performance.now() - start > o.sliceMs) return later();
        let e: TreeEntry | null = job.held;
        job.held = null;
        if (e === null) {
          const next = job.it.next();
          if (next.done) {
            job.last = true;
            break;
          }
          job.consumed++;
          e = next.value;
        }
        const units = codec.pathOf(e)?.length ?? 0;
        if (units > o.maxPathUnits) {
          o.count("entries_skipped", 1);
          continue;
        }
        const size = entrySize(e, job.entries.at(-1) ?? null);
        if (
          job.entries.length > 0 &&
          (job.entries.length >= o.pageEntries || job.bytes + size > o.pageBytes ||
            job.units + units > o.pageUnits)
        ) {
          job.held = e;
          break;
        }
        job.entries.push(e);
        job.bytes += size;
        job.units += units;
      }
      // The held entry is not in this page: it was consumed but belongs to the next.
      const nextCursor = job.consumed - (job.held === null ? 0 : 1);
      job.page = codec.encodePage({
        ...job.request,
        index: job.index++,
        entries: job.entries,
        nextCursor,
        last: job.last,
        corrections: job.corrections,
      });
      job.corrections = [];
      job.entries = [];
      job.bytes = 0;
      job.units = 0;
      job.deadline = o.clock.now() + o.progressMs;
    }
    const port = this.#d.port();
    const room = (port?.queued?.(job.peer) ?? 0) < o.maxQueued;
    if (room && port?.send(job.peer, "tree_repair_page", job.page)) {
      o.count("pages_sent", 1);
      o.count("page_bytes_sent", job.page.byteLength);
      job.page = null;
      return job.last ? end() : later();
    }
    // No room on the stream: wait for it, not past the requester's patience.
    if (o.clock.now() >= job.deadline) return end();
    later(50);
  }
}
