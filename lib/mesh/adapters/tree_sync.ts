/**
 * Cache-aware tree sync in three steps over the sync streams.
 *
 * 1. Publish: every shared tree's decision (`PolicyReplicas.deltaSink`: role, model, kind, path
 *    hash, worker URL) is buffered; once per round (`roundMs`, the gossip interval) the buffer
 *    goes to every open stream as one `TREE_DELTAS` envelope, then is cleared. Not resent, not
 *    relayed: a peer that misses a round catches up by repair. Each envelope carries its
 *    stream's round number, so the receiver sees a round that went missing. The first round on
 *    a new stream also names every non-empty tree the sender holds (groups without deltas), so
 *    a router that joins copies its peers' trees at once instead of waiting for new traffic.
 * 2. Apply: the receiver's policy for that role and model records each delta
 *    (`SharedTrees.applyDelta`, a placement consulted while routing); `applied` counts hashes it
 *    already knew, `unknown` the others.
 * 3. Repair: unknown hashes from a peer whose tree this router has not copied yet, or an
 *    announced tree, make it ask that peer for its whole tree (`tree_requester.ts`); the peer
 *    answers in pages built in slices of `sliceMs` of work, yielding to request handling
 *    between slices (`tree_responder.ts`).
 *
 * Evictions stay local. Deltas of a role or model this router routes without cache-aware are
 * dropped and counted.
 */

import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { TreeRole } from "../../policies/replicas.ts";
import type { StreamPort } from "../streams.ts";
import type { EnvelopeType } from "../wire.ts";
import * as codec from "./tree_codec.ts";
import { TreeRequester } from "./tree_requester.ts";
import { TreeResponder } from "./tree_responder.ts";
import { type TreeSyncOptions, withDefaults } from "./tree_sync_options.ts";

export type { TreeCounter, TreeSyncOptions } from "./tree_sync_options.ts";

interface Group {
  role: TreeRole;
  model: string;
  kind: TreeKind;
  deltas: { hash: number; worker: string }[];
}

/** Keeps one router's cache-aware trees in step with its peers'. */
export class TreeSync {
  readonly #o: Required<TreeSyncOptions>;
  #port: StreamPort | null = null;
  readonly #buffer = new Map<string, Group>();
  #buffered = 0;
  /** Per open peer: delta rounds sent to it, and the last round number received from it. */
  readonly #rounds = new Map<string, { sent: number; received: number }>();
  /** Peers whose stream opened since the last round: told which trees this router holds. */
  readonly #announce = new Set<string>();
  readonly #requester: TreeRequester;
  readonly #responder: TreeResponder;
  #cancelTimer: () => void = () => {};
  #stopped = false;

  /** Builds the sync and takes over the replicas' delta sink. */
  constructor(o: TreeSyncOptions) {
    this.#o = withDefaults(o);
    this.#requester = new TreeRequester({ ...this.#o, port: () => this.#port });
    this.#responder = new TreeResponder({
      ...this.#o,
      port: () => this.#port,
      open: (peer) => !this.#stopped && this.#rounds.has(peer),
    });
    o.replicas.deltaSink = (role, model, kind, hash, worker) =>
      this.#publish(role, model, kind, hash, worker);
  }

  /** Repair sessions in flight (for status and tests). */
  get repairing(): number {
    return this.#requester.sessions;
  }

  /** Connects to the streams and starts the rounds. */
  attach(port: StreamPort): void {
    this.#port = port;
    this.#schedule();
  }

  /** A stream to `peer` opened or closed. */
  peerChanged(peer: string, open: boolean): void {
    if (open) {
      this.#requester.peerOpened(peer);
      this.#rounds.set(peer, { sent: 0, received: 0 });
      this.#announce.add(peer);
    } else {
      this.#requester.peerClosed(peer);
      this.#rounds.delete(peer);
      this.#announce.delete(peer);
    }
  }

  /** An envelope from `peer`. */
  onEnvelope(peer: string, type: EnvelopeType, payload: Uint8Array): void {
    if (type === "tree_deltas") this.#onDeltas(peer, payload);
    else if (type === "tree_repair_request") this.#responder.onRequest(peer, payload);
    else if (type === "tree_repair_page") this.#requester.onPage(peer, payload);
  }

  /** Stops the rounds and detaches from the policies. */
  stop(): void {
    this.#stopped = true;
    this.#cancelTimer();
    this.#o.replicas.deltaSink = null;
  }

  #publish(role: TreeRole, model: string, kind: TreeKind, hash: number, worker: string): void {
    if (this.#buffered >= this.#o.maxDeltas) return this.#o.count("deltas_dropped", 1);
    const k = codec.groupKey(role, model, kind);
    let g = this.#buffer.get(k);
    if (!g) this.#buffer.set(k, g = { role, model, kind, deltas: [] });
    g.deltas.push({ hash, worker });
    this.#buffered++;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancelTimer = this.#o.clock.after(this.#o.roundMs, () => {
      this.#round();
      this.#schedule();
    });
  }

  #round(): void {
    const port = this.#port;
    if (!port) return;
    const fresh = [...this.#announce].filter((p) => this.#rounds.has(p));
    this.#announce.clear();
    if (this.#buffered > 0 || fresh.length > 0) {
      const groups = [...this.#buffer.values()];
      const encoded = codec.encodeDeltas(groups);
      for (const peer of port.openPeers()) {
        const r = this.#rounds.get(peer);
        if (!r) continue;
        // A peer whose stream just opened also hears of every tree held here (a group without
        // deltas), so it can copy them without waiting for new decisions.
        const held = fresh.includes(peer) ? this.#held(groups) : [];
        if (groups.length === 0 && held.length === 0) continue;
        const body = held.length > 0 ? codec.encodeDeltas([...groups, ...held]) : encoded;
        // Counted even when the queue refuses it: the receiver then sees a round skipped.
        const bytes = codec.withRound(body, ++r.sent);
        if (port.send(peer, "tree_deltas", bytes)) {
          this.#o.count("deltas_sent", this.#buffered);
          this.#o.count("delta_bytes_sent", bytes.byteLength);
        } else this.#o.count("deltas_dropped", this.#buffered);
      }
      this.#buffer.clear();
      this.#buffered = 0;
    }
    this.#requester.retryScan();
  }

  /** Empty groups for the non-empty trees held here that `groups` does not name. */
  #held(groups: readonly Group[]): Group[] {
    const named = new Set(groups.map((g) => codec.groupKey(g.role, g.model, g.kind)));
    const out: Group[] = [];
    for (const { role, trees } of this.#o.replicas.allTrees()) {
      for (const { model, kind } of trees.heldTrees()) {
        if (!named.has(codec.groupKey(role, model, kind))) {
          out.push({ role, model, kind, deltas: [] });
        }
      }
    }
    return out;
  }

  #onDeltas(peer: string, payload: Uint8Array): void {
    const d = codec.decodeDeltas(payload);
    if (!d.ok) {
      this.#o.log.warn("dropping undecodable tree deltas", { peer, err: d.detail });
      return this.#o.count("malformed", 1);
    }
    const r = this.#rounds.get(peer);
    if (r) {
      // A skipped round lost decisions: this peer's trees must be copied again.
      if (d.value.round !== r.received + 1) this.#requester.roundMissed(peer);
      r.received = d.value.round;
    }
    for (const g of d.value.groups) {
      this.#o.count("deltas_received", g.deltas.length);
      const trees = this.#o.replicas.treesFor(g.role, g.model);
      if (!trees) {
        this.#o.count("deltas_dropped", g.deltas.length);
        continue;
      }
      let unknown = 0;
      for (const x of g.deltas) if (!trees.applyDelta(g.model, g.kind, x.hash, x.worker)) unknown++;
      this.#o.count("deltas_applied", g.deltas.length - unknown);
      this.#o.count("deltas_unknown", unknown);
      this.#requester.heard(peer, g.role, g.model, g.kind, g.deltas.length, unknown);
    }
  }
}
