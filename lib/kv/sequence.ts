/**
 * Pure decisions of a KV-event stream: how a sequence number relates to the last one applied,
 * and how long to wait before reconnecting.
 *
 * The engines number batches 0, 1, 2, … from the publisher's start, and one PUB connection
 * never reorders or repeats them. So a number past the next one is a gap (batches were
 * dropped: a full send queue, a reconnection, a subscription not yet in place), and one at or
 * below the last is a new publisher. Known gap: a publisher that restarted and sent more than
 * the last number's worth of batches before we reconnected looks like a gap, not a restart.
 */

/** How `seq` follows the last applied sequence number. */
export type SeqStep = "first" | "next" | "gap" | "restart";

/** Classifies `seq` after `last` (null before the first batch). */
export function classifySeq(last: number | null, seq: number): SeqStep {
  if (last === null) return "first";
  if (seq === last + 1) return "next";
  return seq > last ? "gap" : "restart";
}

/** The wait before reconnection attempt `attempt` (0 first): doubling from `initialMs` up to `maxMs`. */
export function reconnectDelay(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}
