/**
 * A trace (`trace.ts`) replayed at a speed, as an `Offer` for the drive loop (`client.ts`).
 * Request i is sent (timestamp_i − timestamp_0) ÷ speed ms after the start, open loop (arrivals
 * never wait for replies), as one user message built from its blocks (`trace_prompts.ts`) with
 * `max_tokens` = its output length; a reference adds its route as headers.
 *
 * Phases, by count: the first `warmup` requests are sent but not measured (they fill the caches
 * and count as history for the infinite-cache bound); the measured window opens with the next
 * request's arrival and closes `duration` seconds later, at the trace's end, or after
 * `maxRequests` measured requests, whichever comes first. Nothing after it is sent. The plan is
 * computed before the run, so the bound covers exactly the requests the window measures.
 */

import { type Offer, sleepUntil } from "./client.ts";
import type { TraceRequest } from "./trace.ts";
import { type BlockTexts, tracePrompt } from "./trace_prompts.ts";

/** How a trace is replayed. */
export interface ReplayOptions {
  /** Timestamps are divided by this (2: twice as fast as recorded). */
  speed: number;
  /** Requests sent before the measured window opens. */
  warmup: number;
  /** Seconds the measured window lasts at most. */
  durationS: number;
  /** Measured requests at most (null: no cap). */
  maxRequests: number | null;
}

/** Which requests a replay sends and measures, and when its window opens and closes. */
export interface ReplayPlan {
  /** The replay speed. */
  speed: number;
  /** First measured request (= the warm-up count). */
  from: number;
  /** One past the last request sent (and measured). */
  to: number;
  /** ms from the start to the window's opening: request `from`'s arrival. */
  warmupMs: number;
  /** ms the window lasts: the duration, or up to the last measured arrival when that ends it. */
  durationMs: number;
}

/** When request `i` of `trace` is sent at `speed`: ms after the replay starts. */
export function arrivalMs(trace: readonly TraceRequest[], i: number, speed: number): number {
  return (trace[i].timestampMs - trace[0].timestampMs) / speed;
}

/** The plan of replaying `trace` as `o` says; throws when no request is left to measure. */
export function replayPlan(trace: readonly TraceRequest[], o: ReplayOptions): ReplayPlan {
  const n = trace.length;
  if (o.warmup >= n) {
    throw new Error(
      `--trace-warmup ${o.warmup} leaves none of the trace's ${n} requests to measure`,
    );
  }
  const from = o.warmup;
  const warmupMs = arrivalMs(trace, from, o.speed);
  const closeMs = warmupMs + o.durationS * 1000;
  let to = from;
  while (
    to < n && arrivalMs(trace, to, o.speed) < closeMs &&
    (o.maxRequests === null || to - from < o.maxRequests)
  ) to++;
  const byTime = to < n && arrivalMs(trace, to, o.speed) >= closeMs;
  return {
    speed: o.speed,
    from,
    to,
    warmupMs,
    durationMs: byTime ? o.durationS * 1000 : arrivalMs(trace, to - 1, o.speed) - warmupMs,
  };
}

/** Headers of request `i` added by a reference (`ref:affinity`'s routing key). */
export type ReplayRoute = (i: number) => Record<string, string>;

/**
 * The offer that replays `trace` as `plan` says, prompts from `blocks`, headers from `route`,
 * each request recorded with its conversation key from `keys` (`trace_keys.ts`) when given.
 */
export function replayOffer(
  trace: readonly TraceRequest[],
  plan: ReplayPlan,
  blocks: BlockTexts,
  route?: ReplayRoute,
  keys?: readonly string[],
): Offer {
  return async (d) => {
    for (let i = 0; i < plan.to;) {
      // Requests due at the same instant leave together, in one turn of the client's event
      // loop (a batch client), their prompts built before the wait so that they leave on time.
      const at = arrivalMs(trace, i, plan.speed);
      const group: number[] = [];
      for (; i < plan.to && arrivalMs(trace, i, plan.speed) === at; i++) group.push(i);
      const contents = group.map((k) => tracePrompt(blocks, trace[k]));
      await sleepUntil(d.t0 + at, Infinity, d.stop);
      if (d.stop.aborted) return;
      group.forEach((k, j) =>
        d.track(
          d.send({
            messages: [{ role: "user", content: contents[j] }],
            maxTokens: trace[k].outputLength,
            headers: route?.(k) ?? {},
            session: `r${k}`,
            turn: 0,
            tenant: null,
            conversation: keys?.[k],
            measured: k >= plan.from,
          }).then(() => {}),
        )
      );
    }
  };
}
