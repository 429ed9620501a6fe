/**
 * Cache-aware tree sync: three steps (publish, apply, repair) over the sync streams.
 *
 * 1. Publish: every shared tree's decision (`PolicyReplicas.deltaSink`: role, model, kind, path
 *    hash, worker URL) is buffered; once per round (`roundMs`, the gossip interval) the buffer
 *    goes to every open stream as one `TREE_DELTAS` envelope, then is cleared. Not resent, not
 *    relayed: a peer that misses a round catches up by repair.
 * 2. Apply: the receiver's policy for that role and model records each delta
 *    (`SharedTrees.applyDelta`, a placement consulted while routing); `applied` counts hashes it
 *    already knew, `unknown` the others.
 * 3. Repair: an unknown hash from a peer whose tree this router has not copied since their
 *    stream opened, or since a round of that peer's deltas went missing (each envelope carries
 *    its stream's round number), means history may be missing (this router started late, the
 *    two were apart, or a queue overflowed), so it asks that peer for its whole tree of that
 *    role, model and kind. Unknown hashes from a peer already copied are simply new decisions:
 *    asking again would resend the tree for every new conversation (upstream repairs on every
 *    unknown hash, which its full-text hashes make nearly every delta). Beyond upstream, the
 *    first round on a new stream also names every non-empty tree the sender holds (groups
 *    without deltas), so a router that joins copies its peers' trees at once instead of
 *    waiting for new traffic. One session per (role, model, kind) at a time; unknown hashes
 *    from its target meanwhile are folded into it, other peers' are repaired from next, one at
 *    a time (what one peer sent need not cover another's). The responder (`tree_responder.ts`)
 *    pages its tree in slices of `sliceMs` of work, yielding to request handling between
 *    slices. Pages of another or an ended session are stale and dropped; duplicates are
 *    ignored. A session without progress for `progressMs` is retried from the pages
 *    already applied (cursor), preferably with another peer (the first is asked again after),
 *    at most `maxRetries` times, then fails (the next unknown hash starts over).
 *
 * Evictions stay local. Deltas of a role or model this router routes without cache-aware are
 * dropped and counted.
 */

import type { Logger } from "../../core/log.ts";
import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { PolicyReplicas, TreeRole } from "../../policies/replicas.ts";
import type { Clock } from "../../core/clock.ts";
import type { StreamPort } from "../store/store_sync.ts";
import type { EnvelopeType } from "../wire.ts";
import * as codec from "./tree_codec.ts";
import { TreeResponder } from "./tree_responder.ts";

/** What tree sync counts (for metrics and benchmarks). */
export type TreeCounter =
  | "deltas_sent"
  | "deltas_received"
  | "deltas_applied"
  | "deltas_unknown"
  | "deltas_dropped"
  | "delta_bytes_sent"
  | "repairs_started"
  | "repairs_finished"
  | "repairs_failed"
  | "repairs_retried"
  | "repairs_folded"
  | "pages_sent"
  | "pages_received"
  | "pages_stale"
  | "page_bytes_sent"
  | "requests_refused"
  | "repairs_queued"
  | "entries_skipped"
  | "malformed";

/** Options of tree sync. */
export interface TreeSyncOptions {
  /** The policies' shared trees. */
  replicas: PolicyReplicas;
  /** Time. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** Random number in [0, 1). */
  random: () => number;
  /** This router's name (session ids). */
  name: string;
  /** Deltas go out this often (1000 ms). */
  roundMs?: number;
  /** A repair without progress this long is retried (5000 ms). */
  progressMs?: number;
  /** Retries of a repair before it fails (3). */
  maxRetries?: number;
  /** Largest page payload (about 2 MiB). */
  pageBytes?: number;
  /** Most entries a page holds (512), so that encoding or decoding one page takes a few ms. */
  pageEntries?: number;
  /** Most path units (characters or token ids, whole paths) a page holds (2^21). */
  pageUnits?: number;
  /** Longest path sent; longer ones are skipped (2^20 units). */
  maxPathUnits?: number;
  /** Pages wait while the stream to the requester holds this many frames (16). */
  maxQueued?: number;
  /** Responder work between two yields (4 ms). */
  sliceMs?: number;
  /**
   * Deltas buffered per round at most; more are dropped and counted (8,192: above what one
   * router routes in a second, and a round that encodes or applies in a few ms).
   */
  maxDeltas?: number;
  /** Repairs answered at once at most; more are refused (the requester retries) (4). */
  maxResponses?: number;
  /** Hears each counted event with its amount. */
  count?: (what: TreeCounter, n: number) => void;
}

interface Group {
  role: TreeRole;
  model: string;
  kind: TreeKind;
  deltas: { hash: number; worker: string }[];
}

interface Session {
  id: string;
  role: TreeRole;
  model: string;
  kind: TreeKind;
  target: string;
  /** Cursor the session's request carried. */
  base: number;
  lastProgress: number;
  retries: number;
  /** Applied pages: index → next cursor. */
  pages: Map<number, number>;
  terminal: number | null;
  /** Other peers that named unknown paths meanwhile: repaired from next, one at a time. */
  pending: Set<string>;
}

/** Keeps one router's cache-aware trees in step with its peers'. */
export class TreeSync {
  readonly #o: Required<TreeSyncOptions>;
  #port: StreamPort | null = null;
  readonly #buffer = new Map<string, Group>();
  #buffered = 0;
  /** Per open peer: groups whose tree was copied from it since the stream opened. */
  readonly #copied = new Map<string, Set<string>>();
  /** Per open peer: delta rounds sent to it, and the last round number received from it. */
  readonly #rounds = new Map<string, { sent: number; received: number }>();
  /** Peers whose stream opened since the last round: told which trees this router holds. */
  readonly #announce = new Set<string>();
  readonly #sessions = new Map<string, Session>();
  readonly #responder: TreeResponder;
  #seq = 0;
  #cancelTimer: () => void = () => {};
  #stopped = false;

  /** Builds the sync and takes over the replicas' delta sink. */
  constructor(o: TreeSyncOptions) {
    this.#o = {
      roundMs: 1000,
      progressMs: 5000,
      maxRetries: 3,
      pageBytes: 2 * 1024 * 1024 - 256,
      pageEntries: 512,
      pageUnits: 1 << 21,
      maxPathUnits: 1 << 20,
      maxQueued: 16,
      sliceMs: 4,
      maxDeltas: 8192,
      maxResponses: 4,
      count: () => {},
      ...o,
    };
    this.#responder = new TreeResponder({
      ...this.#o,
      port: () => this.#port,
      open: (peer) => !this.#stopped && this.#copied.has(peer),
    });
    o.replicas.deltaSink = (role, model, kind, hash, worker) =>
      this.#publish(role, model, kind, hash, worker);
  }

  /** Repair sessions in flight (for status and tests). */
  get repairing(): number {
    return this.#sessions.size;
  }

  /** Connects to the streams and starts the rounds. */
  attach(port: StreamPort): void {
    this.#port = port;
    this.#schedule();
  }

  /** A stream to `peer` opened or closed. */
  peerChanged(peer: string, open: boolean): void {
    if (open) {
      this.#copied.set(peer, new Set());
      this.#rounds.set(peer, { sent: 0, received: 0 });
      this.#announce.add(peer);
    } else {
      this.#copied.delete(peer);
      this.#rounds.delete(peer);
      this.#announce.delete(peer);
    }
  }

  /** An envelope from `peer`. */
  onEnvelope(peer: string, type: EnvelopeType, payload: Uint8Array): void {
    if (type === "tree_deltas") this.#onDeltas(peer, payload);
    else if (type === "tree_repair_request") this.#responder.onRequest(peer, payload);
    else if (type === "tree_repair_page") this.#onPage(peer, payload);
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
    this.#retryScan();
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
      if (d.value.round !== r.received + 1) this.#copied.get(peer)?.clear();
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
      const k = codec.groupKey(g.role, g.model, g.kind);
      if (this.#copied.get(peer)?.has(k) ?? true) continue;
      if (unknown > 0) this.#repair(g.role, g.model, g.kind, peer);
      // A tree announced by a peer just connected: copied unless a repair is already running
      // (its target may know as much; the peer's next unknown path settles it).
      else if (g.deltas.length === 0 && !this.#sessions.has(k)) {
        this.#repair(g.role, g.model, g.kind, peer);
      }
    }
  }

  #repair(role: TreeRole, model: string, kind: TreeKind, from: string): void {
    const k = codec.groupKey(role, model, kind);
    const s = this.#sessions.get(k);
    if (s) {
      if (from === s.target) return this.#o.count("repairs_folded", 1);
      if (!s.pending.has(from)) this.#o.count("repairs_queued", 1);
      s.pending.add(from);
      return;
    }
    const now = this.#o.clock.now();
    const session: Session = {
      id: this.#newId(),
      role,
      model,
      kind,
      target: from,
      base: 0,
      lastProgress: now,
      retries: 0,
      pages: new Map(),
      terminal: null,
      pending: new Set(),
    };
    this.#sessions.set(k, session);
    this.#o.count("repairs_started", 1);
    this.#o.log.info("repairing a cache tree from a peer", { peer: from, model, kind, role });
    this.#ask(session);
  }

  #newId(): string {
    const r = Math.floor(this.#o.random() * 2 ** 32).toString(36);
    return `${this.#o.name}/${++this.#seq}/${r}`;
  }

  #ask(s: Session): void {
    const { id, role, model, kind, base } = s;
    this.#port?.send(
      s.target,
      "tree_repair_request",
      codec.encodeRequest({ session: id, role, model, kind, cursor: base }),
    );
  }

  #retryScan(): void {
    const now = this.#o.clock.now();
    const open = this.#port?.openPeers() ?? [];
    for (const [k, s] of this.#sessions) {
      if (now - s.lastProgress < this.#o.progressMs) continue;
      if (s.retries >= this.#o.maxRetries) {
        this.#end(k, s, false);
        this.#o.count("repairs_failed", 1);
        this.#o.log.warn("cache tree repair failed; the next unknown path starts over", {
          peer: s.target,
          model: s.model,
          kind: s.kind,
          retries: s.retries,
        });
        continue;
      }
      const others = open.filter((p) => p !== s.target);
      let i = 0;
      while (s.pages.has(i)) i++;
      if (others.length > 0) {
        // Another peer's tree is another order: start from its beginning. The first target
        // still owes its own paths; it is asked again once this one ends.
        s.pending.add(s.target);
        s.target = others[Math.floor(this.#o.random() * others.length)];
        s.pending.delete(s.target);
        s.base = 0;
      } else if (i > 0) s.base = s.pages.get(i - 1)!; // the same peer: go on after what arrived
      s.id = this.#newId();
      s.retries++;
      s.pages.clear();
      s.terminal = null;
      s.lastProgress = now;
      this.#o.count("repairs_retried", 1);
      this.#ask(s);
    }
  }

  /**
   * Ends a session. After a success, a peer that named unknown paths meanwhile and is still not
   * copied is repaired from next (what the target sent need not cover it: they may have been
   * apart); after a failure nothing follows until the next unknown path.
   */
  #end(k: string, s: Session, finished: boolean): void {
    this.#sessions.delete(k);
    if (!finished) return;
    for (const p of s.pending) {
      if (this.#copied.get(p)?.has(k) !== false) continue;
      this.#repair(s.role, s.model, s.kind, p);
      const next = this.#sessions.get(k);
      for (const q of s.pending) if (q !== p && next) next.pending.add(q);
      return;
    }
  }

  #onPage(peer: string, payload: Uint8Array): void {
    let s: Session | undefined;
    let k = "";
    // The session is checked on the page's head, before its paths are expanded.
    const p = codec.decodePage(payload, (h) => {
      k = codec.groupKey(h.role, h.model, h.kind);
      s = this.#sessions.get(k);
      return !!s && s.id === h.session && s.target === peer && !s.pages.has(h.index);
    }, this.#o.pageUnits * 2);
    if (!p.ok) {
      this.#o.log.warn("dropping an undecodable tree repair page", { peer, err: p.detail });
      return this.#o.count("malformed", 1);
    }
    if (p.value === null || !s) return this.#o.count("pages_stale", 1);
    const page = p.value;
    this.#o.count("pages_received", 1);
    const trees = this.#o.replicas.treesFor(page.role, page.model);
    if (trees) { for (const e of page.entries) trees.applyEntry(page.model, page.kind, e); }
    s.pages.set(page.index, page.nextCursor);
    s.lastProgress = this.#o.clock.now();
    if (page.last) s.terminal = page.index;
    if (s.terminal === null) return;
    for (let i = 0; i <= s.terminal; i++) if (!s.pages.has(i)) return;
    this.#copied.get(s.target)?.add(k);
    this.#end(k, s, true);
    this.#o.count("repairs_finished", 1);
    this.#o.log.info("cache tree repaired from a peer", {
      peer: s.target,
      model: s.model,
      kind: s.kind,
      role: s.role,
      pages: s.terminal + 1,
    });
  }
}
