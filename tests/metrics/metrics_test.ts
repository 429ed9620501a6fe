/**
 * The gateway's metric set: every SMG name appears in the exposition with the right TYPE once
 * a series exists, labels come out under SMG's names, and two `Metrics` never share state.
 */

import assert from "node:assert/strict";
import { DURATION_BUCKETS, Metrics } from "../../lib/metrics/metrics.ts";

/** Touches one series of every metric so each renders a sample. */
function touchAll(m: Metrics): void {
  m.progressMisses.with("http://w1:8000", "idle").inc();
  m.continuations.with("http://w1:8000", "continued").inc();
  m.traceExported.with().inc(3);
  m.traceDropped.with("queue_full").inc();
  m.traceQueued.with().set(1);
  m.httpRequests.with("POST", "/v1/chat/completions").inc();
  m.httpDuration.with("POST", "/v1/chat/completions").observe(0.2);
  m.httpResponses.with("/v1/chat/completions", "200", "").inc();
  m.httpActive.with().inc();
  m.routerRequests.with("http", "regular", "http", "m", "chat", "true").inc();
  m.routerDuration.with("http", "regular", "http", "m", "chat").observe(0.3);
  m.routerErrors.with("http", "regular", "http", "m", "chat", "timeout").inc();
  m.upstreamResponses.with("http", "200", "").inc();
  m.upstreamSendRetries.with().inc();
  m.ttft.with("http", "regular", "m", "chat").observe(0.05);
  m.cachePredictionError.with("cache_aware").observe(-0.02);
  m.cachedTokens.with("cache_aware", "reported").inc(10);
  m.tpot.with("grpc", "regular", "m", "chat").observe(0.01);
  m.tokens.with("grpc", "regular", "m", "chat", "prompt").inc(5);
  m.workerActive.with("http://w1").set(2);
  m.workerRequests.with("http://w1", "success").inc();
  m.selection.with("regular", "http", "m", "round_robin").inc();
  m.workerErrors.with("regular", "http", "transport").inc();
  m.workerHealth.with("http://w1").set(1);
  m.healthChecks.with("regular", "ok").inc();
  m.poolSize.with("regular", "http", "m").set(1);
  m.cbState.with("http://w1").set(0);
  m.cbTransitions.with("http://w1", "closed", "open").inc();
  m.cbOutcomes.with("http://w1", "failure").inc();
  m.cbFailures.with("http://w1").set(3);
  m.retries.with("regular", "chat").inc();
  m.retriesExhausted.with("regular", "chat").inc();
  m.retryBackoff.with("1").observe(0.01);
  m.frontRejected.with("head_timeout").inc();
  m.rateLimit.with("allowed").inc();
  m.queueDepth.with().set(4);
  m.admissionInflight.with().set(1);
  m.queueRejected.with("full").inc();
  m.overloaded.with("m").set(0);
  m.overloadShed.with("select").inc();
  m.tenantRateLimit.with("allowed").inc();
  m.tenantReservations.with().set(1);
  m.tenantTokens.with("reserved").inc(10);
  m.tenantCluster.with("tokens_in").inc(5);
  m.policyDecisions.with("manual", "vacant").inc();
  m.manualBranch.with("vacant").inc();
  m.consistentHashingBranch.with("ring_hit").inc();
  m.prefixHashBranch.with("ring_hit").inc();
  m.stickyEntries.with().set(3);
  m.routingKeySource.with("rid").inc();
  m.routingKeysActive.with("http://w1:8000").set(1);
  m.matchRatio.with("cache_aware").observe(0.5);
  m.treeChars.with("m").set(10);
  m.treeTokens.with("m").set(16);
  m.treeTenants.with("m", "string").set(2);
  m.placements.with("m").set(1);
  m.treeCorrections.with("m", "string").inc();
  m.treeForgotten.with("m", "string").inc(40);
  m.kvFailures.with("grpc://w:1", "disconnected").inc();
  m.kvBatches.with("grpc://w:1").inc();
  m.kvIndexBlocks.with("m").set(3);
  m.modelCharsPerToken.with("m", "answers").set(7.9);
  m.workerCharsPerToken.with("http://w1").set(8.1);
}

const EXPECTED: [string, "counter" | "gauge" | "histogram"][] = [
  ["smg_http_requests_total", "counter"],
  ["smg_http_request_duration_seconds", "histogram"],
  ["smg_http_responses_total", "counter"],
  ["smg_http_connections_active", "gauge"],
  ["smg_router_requests_total", "counter"],
  ["smg_router_request_duration_seconds", "histogram"],
  ["smg_router_request_errors_total", "counter"],
  ["smg_router_upstream_responses_total", "counter"],
  ["smg_router_upstream_send_retries_total", "counter"],
  ["smg_router_ttft_seconds", "histogram"],
  ["smg_router_tpot_seconds", "histogram"],
  ["smg_router_tokens_total", "counter"],
  ["smg_worker_requests_active", "gauge"],
  ["smg_worker_requests_total", "counter"],
  ["smg_worker_selection_total", "counter"],
  ["smg_worker_errors_total", "counter"],
  ["smg_worker_health", "gauge"],
  ["smg_worker_health_checks_total", "counter"],
  ["smg_worker_pool_size", "gauge"],
  ["smg_worker_cb_state", "gauge"],
  ["smg_worker_cb_transitions_total", "counter"],
  ["smg_worker_cb_outcomes_total", "counter"],
  ["smg_worker_cb_consecutive_failures", "gauge"],
  ["smg_worker_retries_total", "counter"],
  ["smg_worker_retries_exhausted_total", "counter"],
  ["smg_worker_retry_backoff_seconds", "histogram"],
  ["smg_worker_progress_deadline_misses_total", "counter"],
  ["smg_stream_continuations_total", "counter"],
  ["smg_http_front_rejected_total", "counter"],
  ["smg_http_rate_limit_total", "counter"],
  ["smg_admission_queue_depth", "gauge"],
  ["smg_admission_inflight", "gauge"],
  ["smg_admission_queue_rejected_total", "counter"],
  ["smg_workers_overloaded", "gauge"],
  ["smg_worker_overload_shed_total", "counter"],
  ["smg_tenant_rate_limit_total", "counter"],
  ["smg_tenant_rate_limit_reservations", "gauge"],
  ["smg_tenant_rate_limit_tokens_total", "counter"],
  ["smg_tenant_rate_limit_cluster_total", "counter"],
  ["smg_policy_decisions_total", "counter"],
  ["smg_policy_cache_prediction_error", "histogram"],
  ["smg_policy_cached_tokens_total", "counter"],
  ["smg_manual_policy_branch_total", "counter"],
  ["smg_consistent_hashing_policy_branch_total", "counter"],
  ["smg_prefix_hash_policy_branch_total", "counter"],
  ["smg_manual_policy_cache_entries", "gauge"],
  ["smg_routing_key_source_total", "counter"],
  ["smg_worker_routing_keys_active", "gauge"],
  ["smg_cache_aware_match_ratio", "histogram"],
  ["smg_cache_tree_chars", "gauge"],
  ["smg_cache_tree_tokens", "gauge"],
  ["smg_cache_tree_tenants", "gauge"],
  ["smg_cache_placement_entries", "gauge"],
  ["smg_cache_tree_corrections_total", "counter"],
  ["smg_cache_tree_forgotten_total", "counter"],
  ["smg_kv_event_subscription_failures_total", "counter"],
  ["smg_kv_event_batches_total", "counter"],
  ["smg_kv_index_blocks", "gauge"],
  ["smg_policy_chars_per_token", "gauge"],
  ["smg_worker_chars_per_token", "gauge"],
  ["process_resident_memory_bytes", "gauge"],
  ["smg_process_heap_used_bytes", "gauge"],
  ["smg_process_heap_total_bytes", "gauge"],
  ["smg_process_external_memory_bytes", "gauge"],
  ["smg_trace_spans_exported_total", "counter"],
  ["smg_trace_spans_dropped_total", "counter"],
  ["smg_trace_queue_spans", "gauge"],
];

Deno.test("Metrics: every SMG name renders with its TYPE and a sample once a series exists", async () => {
  const m = new Metrics();
  touchAll(m);
  const text = await m.render();
  for (const [name, type] of EXPECTED) {
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
    assert.match(text, new RegExp(`^# HELP ${name} \\S`, "m"), name);
    const sample = type === "histogram" ? `${name}_count` : name;
    assert.match(text, new RegExp(`^${sample}(\\{| )`, "m"), `${name} has a sample`);
  }
  const types = text.split("\n").filter((l) => l.startsWith("# TYPE ")).length;
  assert.equal(types, EXPECTED.length, "no metric missing from the table, none duplicated");
});

Deno.test("Metrics: labels come out under SMG's label names", async () => {
  const m = new Metrics();
  m.routerRequests.with("http", "regular", "http", "llama", "chat", "false").inc(2);
  m.selection.with("regular", "http", "llama", "cache_aware").inc();
  m.cbState.with("http://w1:8000").set(1);
  m.workerActive.with("http://w1:8000").set(3);
  const text = await m.render();
  assert.match(
    text,
    /^smg_router_requests_total\{router_type="http",backend_type="regular",connection_mode="http",model="llama",endpoint="chat",streaming="false"\} 2$/m,
  );
  assert.match(
    text,
    /^smg_worker_selection_total\{worker_type="regular",connection_mode="http",model="llama",policy="cache_aware"\} 1$/m,
  );
  assert.match(text, /^smg_worker_cb_state\{worker="http:\/\/w1:8000"\} 1$/m);
  assert.match(text, /^smg_worker_requests_active\{worker="http:\/\/w1:8000"\} 3$/m);
});

Deno.test("Metrics: duration histograms use SMG's buckets, 1 ms to 2 h", async () => {
  const m = new Metrics();
  m.routerDuration.with("http", "regular", "http", "m", "chat").observe(0.001);
  const text = await m.render();
  const les = [...text.matchAll(/^smg_router_request_duration_seconds_bucket\{.*le="([^"]+)"\}/gm)]
    .map((x) => x[1]);
  assert.deepEqual(les, [...DURATION_BUCKETS.map(String), "+Inf"]);
  assert.match(text, /le="0\.001"\} 1$/m, "1 ms lands in the first bucket");
  assert.equal(DURATION_BUCKETS[0], 0.001);
  assert.equal(DURATION_BUCKETS.at(-1), 7200);
});

/** The value of the unlabelled sample `name` in `text`. */
function sample(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  assert.ok(m, `${name} has a sample`);
  return Number(m[1]);
}

const PROCESS = [
  "process_resident_memory_bytes",
  "smg_process_heap_used_bytes",
  "smg_process_heap_total_bytes",
  "smg_process_external_memory_bytes",
];

Deno.test("Metrics: a fresh instance shows only the unlabelled gauges at 0 and the process's memory", async () => {
  const text = await new Metrics().render();
  const samples = text.split("\n").filter((l) =>
    l !== "" && !l.startsWith("#") && !PROCESS.includes(l.split(" ")[0])
  );
  for (const name of PROCESS) assert.ok(sample(text, name) > 0, name);
  assert.deepEqual(samples.sort(), [
    "smg_admission_inflight 0",
    "smg_admission_queue_depth 0",
    "smg_http_connections_active 0",
  ]);
  assert.match(text, /^# TYPE smg_http_requests_total counter$/m);
});

Deno.test("Metrics: the process's memory is read at each render, not kept from the first", async () => {
  const m = new Metrics();
  const before = await m.render();
  const held = new Uint8Array(64 * 1024 * 1024).fill(1);
  const after = await m.render();
  const grew = (name: string) => sample(after, name) - sample(before, name);
  assert.ok(grew("smg_process_external_memory_bytes") >= 60 * 1024 * 1024, "the buffer counts");
  assert.ok(grew("process_resident_memory_bytes") >= 60 * 1024 * 1024, "its pages are resident");
  const heapTotal = sample(after, "smg_process_heap_total_bytes");
  assert.ok(sample(after, "smg_process_heap_used_bytes") <= heapTotal);
  assert.ok(sample(after, "process_resident_memory_bytes") >= heapTotal);
  assert.equal(held[held.length - 1], 1);
});

Deno.test("Metrics: two instances do not share state", async () => {
  const a = new Metrics();
  const b = new Metrics();
  a.httpRequests.with("GET", "/health").inc(5);
  a.queueDepth.with().set(9);
  assert.notEqual(a.registry, b.registry);
  const textA = await a.render();
  const textB = await b.render();
  assert.match(textA, /^smg_http_requests_total\{method="GET",path="\/health"\} 5$/m);
  assert.match(textA, /^smg_admission_queue_depth 9$/m);
  assert.doesNotMatch(textB, /^smg_http_requests_total\{/m);
  assert.match(textB, /^smg_admission_queue_depth 0$/m);
  b.httpRequests.with("GET", "/health").inc();
  assert.match(await b.render(), /^smg_http_requests_total\{method="GET",path="\/health"\} 1$/m);
  assert.match(await a.render(), /^smg_http_requests_total\{method="GET",path="\/health"\} 5$/m);
});
