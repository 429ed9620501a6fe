/**
 * Cache-aware tree sync in three steps over the sync streams.
 *
 * 1. Publish: every shared tree's decision (`PolicyReplicas.deltaSink`: role, model, kind, path
 *    hash, worker URL) is buffered, each (hash, worker) pair once at its last decision (the
 *    receiver's holders end the same as with every decision); once per round (`roundMs`, the gossip interval) the buffer
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
 * Corrections (tree feedback: a worker reported holding less than its tree said) are their own
 * operation. Published through `PolicyReplicas.correctionSink`, each gets a mesh-wide id and
 * rides the next round in its group, placed among the deltas in the order they were made; the
 * receiver applies it once (`SharedTrees.applyCorrection`: forgets the worker's part of the
 * branch recorded before the request, drops its placements) and publishes the relay that
 * returns (the placements of the paths its own tree forgot, which only it can name). A relay
 * names no branch, so it causes no further relay. Against repairs, the policies keep tombstones
 * (`cache_aware/corrections.ts`): a repair from a peer that has not applied a correction yet
 * cannot re-insert the branch, and a repair's first page carries the responder's tombstones, so
 * a router that missed a correction applies it then. At most `maxCorrections` corrections and
 * `pageUnits` branch units go out per round; more are dropped and counted.
 *
 * Evictions stay local. Deltas and corrections of a role or model this router routes without
 * cache-aware are dropped and counted.
 */

import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { NewCorrection, TreeCorrection, TreeRole } from "../../policies/replicas.ts";
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
  /** Deltas decided before the group's last correction this round, in order. */
  deltas: { hash: number; worker: string }[];
  /**
   * Since then, each hash's workers in the order of their last decision: a worker decided again
   * moves to the end instead of going twice. A decision's ladder repeats its shallow rungs (a
   * shared system prompt) for every request, alternating between the prompt's holders; the
   * receiver keeps a hash's holders most recent first, so its holders end the same as if every
   * decision had been sent (`flush`).
   */
  pending: Map<number, string[]>;
  /** With the time each was published (its age grows until it is sent). */
  corrections: { after: number; correction: TreeCorrection; at: number }[];
}

/** Keeps one router's cache-aware trees in step with its peers'. */
export class TreeSync {
  readonly #o: Required<TreeSyncOptions>;
  #port: StreamPort | null = null;
  readonly #buffer = new Map<string, Group>();
  /** The group the last delta went to (a decision's ladder goes to one group). */
  #last: Group | null = null;
  #buffered = 0;
  /** Corrections buffered, and the branch units they carry. */
  #corrections = 0;
  #correctionUnits = 0;
  /** Names this process's corrections: unique across the mesh and across restarts. */
  readonly #idPrefix: string;
  #nextId = 0;
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
    this.#idPrefix = `${o.name}/${Math.floor(this.#o.random() * 2 ** 32).toString(36)}`;
    this.#requester = new TreeRequester({
      ...this.#o,
      port: () => this.#port,
      correct: (peer, role, model, kind, list) =>
        this.#applyCorrections(peer, role, model, kind, list),
    });
    this.#responder = new TreeResponder({
      ...this.#o,
      port: () => this.#port,
      open: (peer) => !this.#stopped && this.#rounds.has(peer),
    });
    o.replicas.deltaSink = (role, model, kind, hash, worker) =>
      this.#publish(role, model, kind, hash, worker);
    o.replicas.correctionSink = (role, model, kind, c) =>
      this.#publishCorrection(role, model, kind, c);
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
    this.#o.replicas.correctionSink = null;
  }

  #publish(role: TreeRole, model: string, kind: TreeKind, hash: number, worker: string): void {
    const g = this.#group(role, model, kind);
    const workers = g.pending.get(hash);
    if (workers !== undefined && workers[workers.length - 1] === worker) return;
    const i = workers?.indexOf(worker) ?? -1;
    if (i >= 0) {
      workers!.splice(i, 1);
      workers!.push(worker);
      return;
    }
    if (this.#buffered >= this.#o.maxDeltas) return this.#o.count("deltas_dropped", 1);
    if (workers === undefined) g.pending.set(hash, [worker]);
    else workers.push(worker);
    this.#buffered++;
  }

  /** Buffers a correction (this router's, or a relay) for the next round; returns its id. */
  #publishCorrection(role: TreeRole, model: string, kind: TreeKind, c: NewCorrection): string {
    const id = `${this.#idPrefix}/${++this.#nextId}`;
    const units = c.branch?.length ?? 0;
    if (
      this.#corrections >= this.#o.maxCorrections ||
      this.#correctionUnits + units > this.#o.pageUnits
    ) {
      this.#o.count("corrections_dropped", 1);
      return id;
    }
    const g = this.#group(role, model, kind);
    const at = this.#o.clock.now();
    // A delta after the correction may undo it: it goes out even if an earlier one matched.
    flush(g);
    g.corrections.push({ after: g.deltas.length, correction: { ...c, id }, at });
    this.#corrections++;
    this.#correctionUnits += units;
    return id;
  }

  #group(role: TreeRole, model: string, kind: TreeKind): Group {
    const last = this.#last;
    if (last && last.role === role && last.model === model && last.kind === kind) return last;
    const k = codec.groupKey(role, model, kind);
    let g = this.#buffer.get(k);
    if (!g) {
      g = { role, model, kind, deltas: [], pending: new Map(), corrections: [] };
      this.#buffer.set(k, g);
    }
    return this.#last = g;
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
    if (this.#buffered > 0 || this.#corrections > 0 || fresh.length > 0) {
      const now = this.#o.clock.now();
      for (const g of this.#buffer.values()) flush(g);
      const groups = [...this.#buffer.values()].map((g) => ({
        ...g,
        corrections: g.corrections.map(({ after, correction: c, at }) => ({
          after,
          correction: { ...c, ageMs: c.ageMs + now - at },
        })),
      }));
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
          this.#o.count("corrections_sent", this.#corrections);
          this.#o.count("delta_bytes_sent", bytes.byteLength);
        } else {
          this.#o.count("deltas_dropped", this.#buffered);
          this.#o.count("corrections_dropped", this.#corrections);
        }
      }
      this.#buffer.clear();
      this.#last = null;
      this.#buffered = 0;
      this.#corrections = 0;
      this.#correctionUnits = 0;
    }
    this.#requester.retryScan();
  }

  /** Empty groups for the non-empty trees held here that `groups` does not name. */
  #held(groups: readonly codec.DeltaGroup[]): codec.DeltaGroup[] {
    const named = new Set(groups.map((g) => codec.groupKey(g.role, g.model, g.kind)));
    const out: codec.DeltaGroup[] = [];
    for (const { role, trees } of this.#o.replicas.allTrees()) {
      for (const { model, kind } of trees.heldTrees()) {
        if (!named.has(codec.groupKey(role, model, kind))) {
          out.push({ role, model, kind, deltas: [], corrections: [] });
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
        this.#applyCorrections(
          peer,
          g.role,
          g.model,
          g.kind,
          g.corrections.map((c) => c.correction),
        );
        continue;
      }
      let unknown = 0;
      let next = 0; // the next correction, applied once the deltas decided before it are
      for (const [i, x] of g.deltas.entries()) {
        for (; next < g.corrections.length && g.corrections[next].after <= i; next++) {
          this.#applyCorrections(peer, g.role, g.model, g.kind, [g.corrections[next].correction]);
        }
        if (!trees.applyDelta(g.model, g.kind, x.hash, x.worker)) unknown++;
      }
      const rest = g.corrections.slice(next).map((c) => c.correction);
      this.#applyCorrections(peer, g.role, g.model, g.kind, rest);
      this.#o.count("deltas_applied", g.deltas.length - unknown);
      this.#o.count("deltas_unknown", unknown);
      // A group of corrections alone announces no tree.
      if (g.deltas.length > 0 || g.corrections.length === 0) {
        this.#requester.heard(peer, g.role, g.model, g.kind, g.deltas.length, unknown);
      }
    }
  }

  /** Applies `peer`'s corrections of a tree and publishes the relays they return. */
  #applyCorrections(
    peer: string,
    role: TreeRole,
    model: string,
    kind: TreeKind,
    list: readonly TreeCorrection[],
  ): void {
    if (list.length === 0) return;
    this.#o.count("corrections_received", list.length);
    const trees = this.#o.replicas.treesFor(role, model);
    if (!trees) return this.#o.count("corrections_dropped", list.length);
    for (const c of list) {
      const relay = trees.applyCorrection(model, kind, c);
      if (relay === null) continue;
      this.#o.count("corrections_relayed", 1);
      this.#o.log.debug("relaying the placements a peer's tree correction made this tree forget", {
        peer,
        model,
        kind,
        worker: c.worker,
        placements: relay.hashes.length,
      });
      this.#publishCorrection(role, model, kind, relay);
    }
  }
}

/** Moves `g`'s pending decisions to its deltas, hash by hash, each hash's in decision order. */
function flush(g: Group): void {
  for (const [hash, workers] of g.pending) {
    for (const worker of workers) g.deltas.push({ hash, worker });
  }
  g.pending.clear();
}
