/**
 * One summary row of the routing benchmark: what a (target, load point) measurement came to, as
 * the report (`report.ts`) makes it and the verdicts (`verdict.ts`), the guard and the tables
 * read it. Types only; apart from the report so that the verdicts it prints do not import it back.
 */

import type { WorkerCounters } from "./fleet.ts";
import type { Prediction } from "./prediction.ts";

/** One (target, load point) measurement, summarised. */
export interface Summary {
  /** Load point label. */
  point: string;
  /** Target name. */
  target: string;
  /** Measured requests sent, ok and failed (failed includes those cut at the drain timeout). */
  sent: number;
  ok: number;
  failed: number;
  /** Requests still running at the drain timeout, aborted (counted in `failed` if measured). */
  cut: number;
  /** Measured requests sent per second of the window (the offered load as realised). */
  offeredRps: number;
  /** Ok requests and their output tokens per second, from the window's start to the last end. */
  rps: number;
  outTokPerS: number;
  /** Client-side time to first content delta, ms, over ok requests. */
  ttftMeanMs: number | null;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
  /**
   * The workers' own mean time to first token, wall ms from a request's arrival at its worker
   * (queue and prefill): the client's mean minus this is what the way there and back cost (the
   * front, the gateway, the sockets), which routing quality does not explain. Null without the
   * workers' counters.
   */
  engineTtftMeanMs?: number | null;
  /** Client-side end-to-end time, ms, over ok requests. */
  e2eP50Ms: number | null;
  e2eP99Ms: number | null;
  /** Σ cached / Σ prompt tokens over the workers' counters in the window. */
  cacheHitRate: number | null;
  /** The same ratio from the usage chunks the client got (a cross-check of the counters). */
  clientCacheHitRate: number | null;
  /**
   * The client's ratio over the follow-ups alone: measured requests of a conversation an earlier
   * request (warm-up included) was sent for; null when there are none.
   */
  followUpHitRate: number | null;
  /** Max/mean of per-worker prompt tokens and of per-worker requests in the window. */
  spreadTokens: number | null;
  spreadRequests: number | null;
  /**
   * Max/mean of per-worker uncached prompt tokens (prompt − cached: the prefill work each was
   * given; a cached token costs its worker next to nothing).
   */
  spreadUncached: number | null;
  /** Mean prompt tokens per request, from the workers' counters. */
  meanPromptTokens: number | null;
  /** Per-worker counter deltas over the window. */
  workers: WorkerCounters[];
  /** Busy % of each CPU over the window (target+client CPU 0, fleet CPU 1). */
  cpuBusyPct: (number | null)[];
  /** The first few distinct failure reasons. */
  errors: string[];
  /** cache_aware's prediction check over the window (our gateway only), or null. */
  prediction?: Prediction | null;
  /** Trace replay: the infinite-cache bound over the window's requests (`trace_bound.ts`). */
  cacheBound?: number | null;
  /**
   * Trace replay: the mean TTFT no routing goes below, ms: each request alone on its worker,
   * prefilling the share of its prompt the bound leaves uncached at the fleet's prefill speed.
   */
  ttftFloorMs?: number | null;
  /** Several routers behind one front (`smg:<policy>#N`): what they cost. */
  routers?: RouterCost | null;
}

/** Several routers' cost over the window, per measured ok request. */
export interface RouterCost {
  /** Routers, and whether they formed a mesh. */
  n: number;
  mesh: boolean;
  /** CPU µs of all routers (utime + stime) per request. */
  cpuUsPerRequest: number | null;
  /** Tree-sync bytes all routers sent (`router_mesh_tree_bytes_sent_total`) per request. */
  treeBytesPerRequest: number | null;
}
