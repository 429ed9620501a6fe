/**
 * Replication of the store over the sync streams. Each router pushes its own writes to every
 * open stream as they happen (batched per tick), and resends those not acknowledged within
 * `resendMs`. Everything else (writes a router missed while it was away, partitioned or not yet
 * started, and writes relayed from a router it cannot reach) arrives by anti-entropy
 * (`anti_entropy.ts`): when a stream opens, and every `antiEntropyMs` with one random peer, the
 * two sides compare per-bucket hashes of their stores and exchange exactly the writes the other
 * lacks. So a router that joins late or returns from a partition converges without waiting for
 * new writes, and a quiet mesh costs one 64-hash summary per router per interval.
 *
 * Writes learned from a peer are passed on to the other open peers at once (with the same
 * ack and resend), so a router whose stream to the writer is down still hears within a tick.
 * Tombstones are collected (SMG keeps them forever) once older than `tombstoneGraceMs` and held
 * by every member, as anti-entropy proves. A router that returns after that, with a live copy
 * of a removed key, meets the store's collection horizon: its op is refused as `collected`, the
 * ack says so, and it drops its copy (or rewrites it, if it is its own write and it still holds
 * it).
 */

import type { Logger } from "../../core/log.ts";
import type { Clock } from "../../core/clock.ts";
import type { StreamPort } from "../streams.ts";
import type { EnvelopeType } from "../wire.ts";
import { AntiEntropy, keyId } from "./anti_entropy.ts";
import type { LwwStore, Op } from "./lww_store.ts";
import * as codec from "./store_codec.ts";
import { compareVersions } from "./version.ts";

/** Counters the sync reports (per namespace where it applies). */
export interface StoreSyncStats {
  /** Ops sent, by namespace. */
  sent: Map<string, number>;
  /** Ops received, by namespace. */
  received: Map<string, number>;
  /** Ops that changed the store, by namespace. */
  applied: Map<string, number>;
  /** Ops refused (too large, too many keys) or envelopes undecodable, by namespace or "?". */
  dropped: Map<string, number>;
  /** Anti-entropy exchanges started. */
  antiEntropy: number;
}

/** Options of the sync. */
export interface StoreSyncOptions {
  /** The local store. */
  store: LwwStore;
  /** Time. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** Random number in [0, 1). */
  random: () => number;
  /** Resend an unacknowledged write after this (3000 ms). */
  resendMs?: number;
  /** Anti-entropy with one random peer this often (30000 ms). */
  antiEntropyMs?: number;
  /** Every known member but this router, in any status (default: the peers with a stream). */
  members?: () => string[];
  /** Collect a tombstone this long after storing it, once every member holds it (1 h). */
  tombstoneGraceMs?: number;
  /** Hears each acknowledged write's milliseconds from (last) send to ack; default none. */
  lag?: (ms: number) => void;
  /** Hears each counted event (for metrics); default none. */
  count?: (what: "sent" | "received" | "applied" | "dropped" | "anti_entropy", ns: string) => void;
}

interface PeerState {
  /** Own writes up to this store seq were pushed. */
  cursor: number;
  /** Writes sent and not acknowledged, by key id. */
  inflight: Map<string, { op: Op; sentAt: number }>;
}

/** Keeps one router's store in step with its peers'. */
export class StoreSync {
  /** Counters. */
  readonly stats: StoreSyncStats = {
    sent: new Map(),
    received: new Map(),
    applied: new Map(),
    dropped: new Map(),
    antiEntropy: 0,
  };
  readonly #o: Required<StoreSyncOptions>;
  #port: StreamPort | null = null;
  readonly #peers = new Map<string, PeerState>();
  readonly #antiEntropy: AntiEntropy;
  #flushQueued = false;
  #cancelTimer: () => void = () => {};
  #lastAntiEntropy: number;
  #stopped = false;

  /** Builds the sync; `attach` connects it to the streams. */
  constructor(o: StoreSyncOptions) {
    this.#o = {
      resendMs: 3000,
      antiEntropyMs: 30_000,
      count: () => {},
      lag: () => {},
      members: () => [...this.#peers.keys()],
      tombstoneGraceMs: 3_600_000,
      ...o,
    };
    this.#lastAntiEntropy = o.clock.now();
    this.#antiEntropy = new AntiEntropy({
      store: o.store,
      clock: o.clock,
      log: o.log,
      tombstoneGraceMs: this.#o.tombstoneGraceMs,
      port: () => this.#port,
      members: () => this.#o.members(),
      sendOps: (peer, ops) => this.#sendOps(peer, this.#peers.get(peer) ?? null, ops),
      malformed: (peer, detail) => this.#malformed(peer, detail),
      started: () => {
        this.stats.antiEntropy++;
        this.#o.count("anti_entropy", "");
      },
    });
    o.store.onChange((_e, origin) => {
      if (origin === "local") this.#queueFlush();
    });
  }

  /** Connects to the streams and starts the timer. */
  attach(port: StreamPort): void {
    this.#port = port;
    this.#tick();
  }

  /** A stream to `peer` opened (start anti-entropy) or closed. */
  peerChanged(peer: string, open: boolean): void {
    if (!open) return void this.#peers.delete(peer);
    this.#peers.set(peer, { cursor: this.#o.store.seq, inflight: new Map() });
    this.#antiEntropy.sendSummary(peer);
  }

  /** An envelope from `peer`. */
  onEnvelope(peer: string, type: EnvelopeType, payload: Uint8Array): void {
    if (type === "crdt_batch") return this.#onBatch(peer, payload);
    if (type === "crdt_ack") return this.#onAck(peer, payload);
    if (type === "digest") return this.#antiEntropy.onDigest(peer, payload);
  }

  /** Stops the timer. */
  stop(): void {
    this.#stopped = true;
    this.#cancelTimer();
  }

  #queueFlush(): void {
    if (this.#flushQueued || this.#stopped) return;
    this.#flushQueued = true;
    this.#o.clock.after(0, () => {
      this.#flushQueued = false;
      this.#flush();
    });
  }

  /** Pushes each peer the own writes made since its cursor. */
  #flush(): void {
    const store = this.#o.store;
    for (const [peer, st] of this.#peers) {
      const ops: Op[] = [];
      for (const e of store.changesSince(st.cursor)) if (e.replica === store.replica) ops.push(e);
      st.cursor = store.seq;
      this.#sendOps(peer, st, ops);
    }
  }

  #tick(): void {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    for (const [peer, st] of this.#peers) {
      const again: Op[] = [];
      for (const [id, f] of st.inflight) {
        const current = this.#o.store.entry(f.op.ns, f.op.key);
        if (!current || compareVersions(current, f.op) !== 0) st.inflight.delete(id);
        else if (now - f.sentAt >= this.#o.resendMs) again.push(f.op);
      }
      this.#sendOps(peer, st, again);
    }
    if (now - this.#lastAntiEntropy >= this.#o.antiEntropyMs) {
      this.#lastAntiEntropy = now;
      const open = [...this.#peers.keys()];
      if (open.length > 0) {
        this.#antiEntropy.sendSummary(open[Math.floor(this.#o.random() * open.length)]);
      }
      this.#antiEntropy.collect(now);
    }
    this.#cancelTimer = this.#o.clock.after(1000, () => this.#tick());
  }

  #sendOps(peer: string, st: PeerState | null, ops: readonly Op[]): void {
    if (ops.length === 0 || !this.#port) return;
    const now = this.#o.clock.now();
    let batch: Op[] = [];
    let bytes = 0;
    const ship = () => {
      if (batch.length === 0) return;
      const taken = this.#port!.send(peer, "crdt_batch", codec.encodeBatch(batch));
      for (const op of batch) {
        if (taken) this.#bump("sent", op.ns);
        // Refused by a full queue or sent: either way it waits for an ack, and is resent.
        st?.inflight.set(keyId(op), { op, sentAt: now });
      }
      batch = [];
      bytes = 0;
    };
    for (const op of ops) {
      const size = op.key.length + op.ns.length + op.replica.length + (op.value?.length ?? 0) + 24;
      if (bytes + size > codec.BATCH_BYTES) ship();
      batch.push(op);
      bytes += size;
    }
    ship();
  }

  #onBatch(peer: string, payload: Uint8Array): void {
    const d = codec.decodeBatch(payload);
    if (!d.ok) return this.#malformed(peer, d.detail);
    const now = this.#o.clock.now();
    const held: codec.KeyVersion[] = [];
    const collected: codec.KeyVersion[] = [];
    const belowHorizon: codec.KeyVersion[] = [];
    const learned: Op[] = [];
    for (const op of d.value) {
      this.#bump("received", op.ns);
      const r = this.#o.store.apply(op, now);
      const v = { ns: op.ns, key: op.key, clock: op.clock, replica: op.replica };
      if (r === "applied") {
        this.#bump("applied", op.ns);
        learned.push(op);
      } else if (r === "collected") collected.push(v);
      else if (r === "below_horizon") belowHorizon.push(v);
      else if (r !== "stale") this.#bump("dropped", op.ns);
      // Acknowledged even when refused: resending a write this router refuses changes nothing.
      held.push(v);
    }
    if (held.length > 0) {
      const clock = this.#o.store.clock;
      this.#port?.send(
        peer,
        "crdt_ack",
        codec.encodeAck({ versions: held, collected, belowHorizon, clock }),
      );
    }
    // Pass what was news here on to the other peers, which may not reach the writer.
    for (const [other, st] of this.#peers) if (other !== peer) this.#sendOps(other, st, learned);
  }

  #onAck(peer: string, payload: Uint8Array): void {
    const d = codec.decodeAck(payload);
    if (!d.ok) return this.#malformed(peer, d.detail);
    const st = this.#peers.get(peer);
    if (!st) return;
    this.#o.store.observe(d.value.clock);
    for (const v of d.value.collected) this.#missedCollection(v, true);
    for (const v of d.value.belowHorizon) this.#missedCollection(v, false);
    for (const v of d.value.versions) {
      const f = st.inflight.get(keyId(v));
      if (f && compareVersions(f.op, v) <= 0) {
        st.inflight.delete(keyId(v));
        this.#o.lag(this.#o.clock.now() - f.sentAt);
      }
    }
  }

  /**
   * A peer refused `v`: it collected a removal of that key (`keyCollected`), or `v` is at or
   * below its horizon. This router's own write is rewritten (it still holds it live, so it
   * still means it; the clock already moved past the peer's); a copy of another router's
   * write is dropped only when the key's removal was collected (below the horizon it may be
   * a new write of a router that just started, which rewrites it itself); a tombstone the peer
   * collected is dropped here too, so it stops travelling.
   */
  #missedCollection(v: codec.KeyVersion, keyCollected: boolean): void {
    const store = this.#o.store;
    const e = store.entry(v.ns, v.key);
    if (!e) return;
    const now = this.#o.clock.now();
    if (e.value === null) {
      if (keyCollected) store.dropCollected(v.ns, v.key, e, now, this.#o.tombstoneGraceMs);
      return;
    }
    if (compareVersions(e, v) !== 0) return;
    if (e.replica === store.replica) store.write(v.ns, v.key, e.value, now);
    else if (keyCollected) store.forget(v.ns, v.key, v);
  }

  #bump(what: "sent" | "received" | "applied" | "dropped", ns: string): void {
    bump(this.stats[what], ns);
    this.#o.count(what, ns);
  }

  #malformed(peer: string, detail: string): void {
    this.#bump("dropped", "?");
    this.#o.log.warn("undecodable store envelope", { peer, detail });
  }
}

function bump(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}
