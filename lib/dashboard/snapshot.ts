/**
 * The status page's JSON snapshot (`GET /dashboard/snapshot`), a stable contract that scripts may
 * read too (docs/http-api.md, "Status snapshot"): the workers as they are now, the routing samples
 * newer than the page's last (`?since=`), and the mesh when it is on. Field names are snake_case; a
 * field is only ever added, and `schema` changes if one is removed or changes meaning.
 *
 * In: the registry, the history, the gateway-level facts and a view of the mesh; out: a plain
 * object for `JSON.stringify`. Reads only.
 */

import type { SlowRequests } from "./slow.ts";
import type { Clock } from "../core/clock.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { ModelRatio } from "../workers/text_ratios.ts";
import type { Worker } from "../workers/worker.ts";
import type { RoutingHistory, RoutingSample } from "./history.ts";

/** The snapshot's format version: a removed field or a changed meaning bumps it. */
export const SNAPSHOT_SCHEMA = 1;

/** One mesh member as this router sees it. */
export interface DashboardMember {
  /** Router name. */
  name: string;
  /** Mesh address (host:port). */
  address: string;
  /** SWIM status: ALIVE, SUSPECTED, DOWN, LEAVING. */
  status: string;
  /** Its incarnation number. */
  incarnation: number;
  /** Whether a sync stream to it is open. */
  stream: boolean;
}

/** What the page shows of the mesh (built by the composition root from its `Mesh`). */
export interface DashboardMesh {
  /** This router's name. */
  name: string;
  /** This router's own status. */
  status: string;
  /** Lifeguard local-health score (0 is healthy). */
  localHealth: number;
  /** Why the mesh is off although enabled, else null. */
  failure: string | null;
  /** Every member, this router included. */
  members: DashboardMember[];
  /** Frames queued on the sync stream to `peer`. */
  queued(peer: string): number;
  /** Replicated-store keys by namespace. */
  store: Record<string, { live: number; tombstones: number }>;
}

/** What a snapshot is built from. */
export interface SnapshotDeps {
  /** The workers, in registration order. */
  workers: () => readonly Worker[];
  /** The gateway's metrics (per-worker failures). */
  metrics: Metrics;
  /** The routing history. */
  history: RoutingHistory;
  /** The gateway's clock. */
  clock: Clock;
  /** Wall-clock milliseconds since the epoch (default `Date.now`): sample times for scripts. */
  wallClock?: () => number;
  /** When the gateway was built (clock ms). */
  startedAt: number;
  /** The default policy's name (`--policy`). */
  policy: string;
  /** Whether the gateway is draining (readiness 503). */
  draining: () => boolean;
  /** The mesh, or null when it is off. */
  mesh: () => DashboardMesh | null;
  /** Characters per token per model, as text-routed requests are routed with (default none). */
  models?: () => readonly ModelRatio[];
  /** The recent slow requests, with tracing on (default none: tracing off). */
  slow?: SlowRequests | null;
}

const round = (v: number, digits = 3) => {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
};
const maybe = (v: number | null, digits = 3) => (v === null ? null : round(v, digits));

/** The snapshot with the samples numbered above `since`. */
export function snapshot(d: SnapshotDeps, since: number): Record<string, unknown> {
  const now = d.clock.now();
  const wall = (d.wallClock ?? Date.now)();
  const failures = new Map<string, number>();
  for (const { labels, s } of d.metrics.workerRequests.entries()) {
    if (labels.outcome === "failure") failures.set(labels.worker, s.value);
  }
  const streams = streamCounts(d.metrics);
  return {
    schema: SNAPSHOT_SCHEMA,
    time_unix_ms: Math.round(wall),
    uptime_secs: Math.floor((now - d.startedAt) / 1000),
    interval_ms: d.history.intervalMs,
    policy: d.policy,
    draining: d.draining(),
    workers: d.workers().map((w) =>
      workerJson(w, now, failures.get(w.url) ?? 0, streams.get(w.url) ?? NO_STREAMS)
    ),
    models: (d.models?.() ?? []).map((m) => ({
      model: m.model,
      chars_per_token: round(m.charsPerToken, 2),
      samples: m.samples,
      source: m.source,
    })),
    routing: {
      seq: d.history.seq,
      samples: d.history.since(since).map((s) => sampleJson(s, wall - (now - s.at))),
    },
    mesh: meshJson(d.mesh()),
    slow_requests: d.slow
      ? d.slow.list(now).map((e) => ({
        trace_id: e.traceId,
        request_id: e.requestId,
        route: e.route,
        status: e.status,
        ms: round(e.ms, 1),
        age_secs: Math.floor((now - e.at) / 1000),
      }))
      : null,
  };
}

/** A worker's progress deadline misses and broken streams, by how they went on. */
interface StreamCounts {
  misses: number;
  broken: number;
  continued: number;
}

const NO_STREAMS: StreamCounts = { misses: 0, broken: 0, continued: 0 };

/** Each worker's `StreamCounts`, from the metrics, by URL. */
function streamCounts(m: Metrics): Map<string, StreamCounts> {
  const out = new Map<string, StreamCounts>();
  const of = (url: string) => {
    let c = out.get(url);
    if (!c) out.set(url, c = { ...NO_STREAMS });
    return c;
  };
  for (const { labels, s } of m.progressMisses.entries()) of(labels.worker).misses += s.value;
  for (const { labels, s } of m.continuations.entries()) {
    const c = of(labels.worker);
    c.broken += s.value;
    if (labels.result === "continued" || labels.result === "completed") c.continued += s.value;
  }
  return out;
}

function workerJson(
  w: Worker,
  now: number,
  errors: number,
  streams: StreamCounts,
): Record<string, unknown> {
  const load = w.load;
  return {
    id: w.id,
    url: w.url,
    model: w.models?.[0] ?? null,
    type: w.type,
    connection: w.connection,
    origin: w.origin,
    status: w.status,
    breaker: w.breaker.state(now),
    consecutive_failures: w.breaker.consecutiveFailures,
    overloaded: w.overloaded,
    stalled: w.progress.stalled(now),
    deadline_misses_total: streams.misses,
    streams_broken_total: streams.broken,
    streams_continued_total: streams.continued,
    in_flight: w.ownInFlight,
    prefill_backlog_tokens: Math.round(w.ownPrefillTokens),
    requests_total: w.requestsTotal,
    errors_total: errors,
    chars_per_token: maybe(w.charsPerToken, 2),
    cached_share: w.reportedPromptTokens > 0
      ? round(w.reportedCachedTokens / w.reportedPromptTokens)
      : null,
    engine_cache_hit_rate: maybe(load?.cacheHitRate ?? null),
    running_requests: load?.runningRequests ?? null,
    waiting_requests: load?.waitingRequests ?? null,
    kv_usage: load ? round(load.tokenUsage) : null,
  };
}

function sampleJson(s: RoutingSample, unixMs: number): Record<string, unknown> {
  const branches: Record<string, number> = {};
  for (const [k, v] of Object.entries(s.branchesPerSec)) branches[k] = round(v, 2);
  return {
    seq: s.seq,
    time_unix_ms: Math.round(unixMs),
    requests_per_sec: round(s.requestsPerSec, 2),
    errors_per_sec: round(s.errorsPerSec, 2),
    branches_per_sec: branches,
    ttft_p50_ms: s.ttftP50Ms,
    ttft_p99_ms: s.ttftP99Ms,
    latency_p50_ms: s.latencyP50Ms,
    latency_p99_ms: s.latencyP99Ms,
    predictions_per_sec: round(s.predictionsPerSec, 2),
    prediction_error_mean: maybe(s.predictionErrorMean),
    prediction_within_0_1: maybe(s.predictionWithin10),
    mesh_lag_p50_ms: s.meshLagP50Ms,
    mesh_lag_p99_ms: s.meshLagP99Ms,
  };
}

function meshJson(m: DashboardMesh | null): Record<string, unknown> | null {
  if (m === null) return null;
  const peers = m.members.filter((x) => x.name !== m.name);
  return {
    name: m.name,
    status: m.status,
    local_health: m.localHealth,
    failure: m.failure,
    members: m.members.map((x) => ({
      name: x.name,
      address: x.address,
      status: x.status,
      incarnation: x.incarnation,
      self: x.name === m.name,
      stream_open: x.name === m.name ? null : x.stream,
      queued_frames: x.name === m.name || !x.stream ? null : m.queued(x.name),
    })),
    streams_open: peers.filter((x) => x.stream).length,
    store: m.store,
  };
}
