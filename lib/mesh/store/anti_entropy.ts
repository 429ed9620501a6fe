/**
 * Anti-entropy for the replicated store (`store_sync.ts` runs it): two routers compare per-bucket
 * hashes of their stores (a 64-hash summary) and exchange exactly the writes the other lacks.
 * In: a peer's `digest` envelopes (a summary, or the versions it holds in the buckets that
 * differ); out: digests to that peer, and the writes it lacks, handed to the sync's sender.
 *
 * It also decides which tombstones may be collected: a bucket of a peer's summary that matches
 * ours proves the peer holds every tombstone of that bucket we stored before that moment (a
 * summary that asks for a reply is answered with ours, so both sides learn it). A tombstone
 * older than the grace period is collected once every member has been seen in step on its
 * bucket since it was stored; a member that cannot be reached blocks collection until the
 * membership forgets it.
 */

import type { Logger } from "../../core/log.ts";
import type { Clock } from "../../core/clock.ts";
import type { StreamPort } from "../streams.ts";
import type { LwwStore, Op } from "./lww_store.ts";
import * as codec from "./store_codec.ts";
import { compareVersions } from "./version.ts";

/** Buckets of the anti-entropy summary. */
export const BUCKETS = 64;

/** What anti-entropy needs from the store sync that runs it. */
export interface AntiEntropyDeps {
  /** The local store. */
  store: LwwStore;
  /** Time. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** The streams (null before the sync is attached). */
  port: () => StreamPort | null;
  /** Every known member but this router, in any status. */
  members: () => string[];
  /** Collect a tombstone this long after storing it, once every member holds it. */
  tombstoneGraceMs: number;
  /** Sends `peer` writes it lacks (batched, acknowledged and resent like the sync's own). */
  sendOps: (peer: string, ops: readonly Op[]) => void;
  /** An undecodable envelope from `peer` (counted and logged by the sync). */
  malformed: (peer: string, detail: string) => void;
  /** An exchange started (a summary sent; counted by the sync). */
  started: () => void;
}

/** One router's side of anti-entropy with each of its peers. */
export class AntiEntropy {
  readonly #d: AntiEntropyDeps;
  /** Per peer and bucket, when its summary last matched ours (it held all we stored before). */
  readonly #inSyncAt = new Map<string, number[]>();

  /** Anti-entropy over `d`. */
  constructor(d: AntiEntropyDeps) {
    this.#d = d;
  }

  /** A summary of the store; `reply` asks a peer whose store matches to answer with its own. */
  sendSummary(peer: string, reply = true): void {
    this.#d.started();
    const digest = {
      buckets: summary(this.#d.store),
      versions: [],
      versionBuckets: [],
      reply,
    };
    this.#d.port()?.send(peer, "digest", codec.encodeDigest(digest));
  }

  /** A `digest` envelope from `peer`. */
  onDigest(peer: string, payload: Uint8Array): void {
    const d = codec.decodeDigest(payload);
    if (!d.ok) return this.#d.malformed(peer, d.detail);
    const store = this.#d.store;
    const m = d.value;
    if (m.buckets.length > 0) {
      // A summary: answer the buckets that differ with what this router holds there.
      const ours = summary(store);
      const differ = ours.flatMap((h, i) => (h !== m.buckets[i] ? [i] : []));
      const now = this.#d.clock.now();
      let synced = this.#inSyncAt.get(peer);
      if (!synced) this.#inSyncAt.set(peer, synced = new Array<number>(BUCKETS).fill(-Infinity));
      for (let i = 0; i < BUCKETS; i++) if (ours[i] === m.buckets[i]) synced[i] = now;
      if (m.reply) this.sendSummary(peer, false);
      if (differ.length === 0) return;
      return this.#sendVersions(peer, differ, true);
    }
    // Versions: send what the peer lacks in those buckets, and ours in return if asked.
    const buckets = new Set(m.versionBuckets.filter((b) => b >= 0 && b < BUCKETS));
    const theirs = new Map(m.versions.map((v) => [keyId(v), v]));
    const lacking: Op[] = [];
    for (const e of store.all()) {
      if (!buckets.has(bucketOf(keyId(e)))) continue;
      const t = theirs.get(keyId(e));
      if (!t || compareVersions(e, t) > 0) lacking.push(e);
    }
    this.#d.sendOps(peer, lacking);
    if (m.reply) this.#sendVersions(peer, [...buckets], false);
  }

  /** Collects the tombstones every member holds (see the module comment). */
  collect(now: number): void {
    const members = this.#d.members();
    for (const p of this.#inSyncAt.keys()) if (!members.includes(p)) this.#inSyncAt.delete(p);
    const n = this.#d.store.collect(
      now,
      this.#d.tombstoneGraceMs,
      (e) => {
        const b = bucketOf(keyId(e));
        return members.every((m) => (this.#inSyncAt.get(m)?.[b] ?? -Infinity) > e.storedAt);
      },
    );
    if (n > 0) this.#d.log.debug("collected tombstones", { count: n });
  }

  /** This router's versions in `buckets`, in messages of at most about 1 MiB. */
  #sendVersions(peer: string, buckets: number[], reply: boolean): void {
    const per = new Map<number, codec.KeyVersion[]>(buckets.map((b) => [b, []]));
    for (const e of this.#d.store.all()) {
      per.get(bucketOf(keyId(e)))?.push({
        ns: e.ns,
        key: e.key,
        clock: e.clock,
        replica: e.replica,
      });
    }
    let versions: codec.KeyVersion[] = [];
    let covered: number[] = [];
    let bytes = 0;
    const ship = () => {
      const digest = { buckets: [], versions, versionBuckets: covered, reply };
      this.#d.port()?.send(peer, "digest", codec.encodeDigest(digest));
      versions = [];
      covered = [];
      bytes = 0;
    };
    for (const [b, list] of per) {
      const size = list.reduce((n, v) => n + v.ns.length + v.key.length + v.replica.length + 16, 0);
      if (covered.length > 0 && bytes + size > codec.BATCH_BYTES) ship();
      versions.push(...list);
      covered.push(b);
      bytes += size;
    }
    if (covered.length > 0) ship();
  }
}

/** A key's id across namespaces: namespace and key. */
export function keyId(v: { ns: string; key: string }): string {
  return `${v.ns}\u0000${v.key}`;
}

/** FNV-1a, 32 bits. */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The bucket of a key id. */
export function bucketOf(keyId: string): number {
  return fnv(keyId) % BUCKETS;
}

/** Per-bucket XOR of (key, version) hashes, tombstones included. */
export function summary(store: LwwStore): number[] {
  const out = new Array<number>(BUCKETS).fill(0);
  for (const e of store.all()) {
    const k = keyId(e);
    out[bucketOf(k)] = (out[bucketOf(k)] ^ fnv(`${k}\u0000${e.clock}\u0000${e.replica}`)) >>> 0;
  }
  return out;
}
