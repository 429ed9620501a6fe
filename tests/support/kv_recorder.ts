/** A `KvEventSink` for tests: records every batch and status, and lets a test wait on them. */

import type { KvEventBatch } from "../../lib/kv/events.ts";
import type { KvEventSink, KvStreamStatus } from "../../lib/kv/sink.ts";
import { Waiters } from "../../support/wait.ts";

/** Records everything a KV-event stream hands its consumer. */
export class Recorder implements KvEventSink {
  readonly batches: KvEventBatch[] = [];
  readonly statuses: KvStreamStatus[] = [];
  readonly waiters = new Waiters();

  onBatch(batch: KvEventBatch): void {
    this.batches.push(batch);
    this.waiters.poke();
  }

  onStatus(status: KvStreamStatus): void {
    this.statuses.push(status);
    this.waiters.poke();
  }

  /** The batches' sequence numbers, in order. */
  get seqs(): number[] {
    return this.batches.map((b) => b.seq);
  }

  /** The statuses' kinds, in order. */
  kinds(): string[] {
    return this.statuses.map((s) => s.kind);
  }

  /** The statuses of `kind`. */
  of<K extends KvStreamStatus["kind"]>(kind: K): Extract<KvStreamStatus, { kind: K }>[] {
    return this.statuses.filter((s): s is Extract<KvStreamStatus, { kind: K }> => s.kind === kind);
  }

  /** Resolves once `cond` holds, checked after each batch or status (rejects after `ms`). */
  until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
    return this.waiters.wait(cond, what, ms);
  }
}
