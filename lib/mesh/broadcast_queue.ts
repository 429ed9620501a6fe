/**
 * The piggyback queue (memberlist's TransmitLimitedQueue): membership updates waiting to ride
 * on outgoing pings and acks. Each update goes out a bounded number of times, the least-sent
 * first; a newer update about the same member replaces the older one. Owned by the SWIM state.
 */

import type { MemberUpdate } from "./member.ts";

interface Queued {
  update: MemberUpdate;
  transmits: number;
  id: number;
}

/** Updates to piggyback, each sent at most `limit` times. */
export class BroadcastQueue {
  #items = new Map<string, Queued>();
  #nextId = 0;

  /** Queues `update`, replacing any queued update about the same member. */
  push(update: MemberUpdate): void {
    this.#items.set(update.name, { update, transmits: 0, id: this.#nextId++ });
  }

  /** Drops any queued update about `name`. */
  remove(name: string): void {
    this.#items.delete(name);
  }

  /** Queued updates. */
  get size(): number {
    return this.#items.size;
  }

  /**
   * Up to `max` updates for one message, the least-sent (then newest) first; each taken one
   * counts a transmission and leaves the queue after its `limit`-th.
   */
  take(max: number, limit: number): MemberUpdate[] {
    if (this.#items.size === 0 || max <= 0) return [];
    const all = [...this.#items.values()];
    all.sort((a, b) => a.transmits - b.transmits || b.id - a.id);
    const out: MemberUpdate[] = [];
    for (const q of all.slice(0, max)) {
      out.push(q.update);
      if (++q.transmits >= limit) this.#items.delete(q.update.name);
    }
    return out;
  }
}
