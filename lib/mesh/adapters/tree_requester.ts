/**
 * The asking side of cache-aware tree repair (`tree_sync.ts` runs it; `tree_responder.ts`
 * answers). In: what tree sync learned from a peer's delta round (unknown hashes, or a tree the
 * peer announced), and the `TREE_REPAIR_PAGE`s that come back; out: `TREE_REPAIR_REQUEST`s, and
 * each page's entries replayed into the policy's trees (`SharedTrees.applyEntry`).
 *
 * An unknown hash from a peer whose tree this router has not copied since their stream opened,
 * or since a round of that peer's deltas went missing, means history may be missing (this
 * router started late, the two were apart, or a queue overflowed), so it asks that peer for its
 * whole tree of that role, model and kind (a session's first page also carries the peer's
 * remembered corrections, applied before any entry). Unknown hashes from a peer already copied are simply
 * new decisions: asking again would resend the tree for every new conversation (SMG repairs on
 * every unknown hash, which its full-text hashes make nearly every delta). A tree a peer
 * announces when their stream opens (a group without deltas) is copied at once too, unless a
 * repair of it is already running.
 *
 * One session per (role, model, kind) at a time; unknown hashes from its target meanwhile are
 * folded into it, other peers' are repaired from next, one at a time (what one peer sent need
 * not cover another's). Pages of another or an ended session are stale and dropped; duplicates
 * are ignored. A session without progress for `progressMs` is retried from the pages already
 * applied (cursor), preferably with another peer (the first is asked again after), at most
 * `maxRetries` times, then fails (the next unknown hash starts over).
 */

import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { TreeCorrection, TreeRole } from "../../policies/replicas.ts";
import type { StreamPort } from "../streams.ts";
import * as codec from "./tree_codec.ts";
import type { TreeSyncOptions } from "./tree_sync_options.ts";

/** What the requester needs. */
export type RequesterDeps =
  & Required<
    Pick<
      TreeSyncOptions,
      | "replicas"
      | "clock"
      | "log"
      | "random"
      | "name"
      | "progressMs"
      | "maxRetries"
      | "pageUnits"
      | "count"
    >
  >
  & {
    /** The streams (null before attach). */
    port: () => StreamPort | null;
    /** Applies corrections a page carried from `peer`. */
    correct: (
      peer: string,
      role: TreeRole,
      model: string,
      kind: TreeKind,
      corrections: readonly TreeCorrection[],
    ) => void;
  };

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

/** Repairs this router's trees from its peers'. */
export class TreeRequester {
  readonly #o: RequesterDeps;
  /** Per open peer: groups whose tree was copied from it since the stream opened. */
  readonly #copied = new Map<string, Set<string>>();
  readonly #sessions = new Map<string, Session>();
  #seq = 0;

  /** A requester over `o`. */
  constructor(o: RequesterDeps) {
    this.#o = o;
  }

  /** Repair sessions in flight. */
  get sessions(): number {
    return this.#sessions.size;
  }

  /** A stream to `peer` opened: none of its trees is copied yet. */
  peerOpened(peer: string): void {
    this.#copied.set(peer, new Set());
  }

  /** The stream to `peer` closed. */
  peerClosed(peer: string): void {
    this.#copied.delete(peer);
  }

  /** A round of `peer`'s deltas went missing: its trees must be copied again. */
  roundMissed(peer: string): void {
    this.#copied.get(peer)?.clear();
  }

  /**
   * `peer`'s delta round held a group of `deltas` deltas, `unknown` of them new here (a group
   * without deltas announces a tree the peer holds): repairs if its tree is not copied yet.
   */
  heard(
    peer: string,
    role: TreeRole,
    model: string,
    kind: TreeKind,
    deltas: number,
    unknown: number,
  ): void {
    const k = codec.groupKey(role, model, kind);
    if (this.#copied.get(peer)?.has(k) ?? true) return;
    if (unknown > 0) this.#repair(role, model, kind, peer);
    // A tree announced by a peer just connected: copied unless a repair is already running
    // (its target may know as much; the peer's next unknown path settles it).
    else if (deltas === 0 && !this.#sessions.has(k)) {
      this.#repair(role, model, kind, peer);
    }
  }

  /** Retries or fails the sessions without progress for `progressMs` (once per round). */
  retryScan(): void {
    const now = this.#o.clock.now();
    const open = this.#o.port()?.openPeers() ?? [];
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

  /** A repair page from `peer`. */
  onPage(peer: string, payload: Uint8Array): void {
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
    // Corrections first: the entries of a peer that has not applied one must not undo it.
    this.#o.correct(peer, page.role, page.model, page.kind, page.corrections);
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
    this.#o.port()?.send(
      s.target,
      "tree_repair_request",
      codec.encodeRequest({ session: id, role, model, kind, cursor: base }),
    );
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
}
