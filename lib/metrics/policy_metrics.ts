/**
 * The metrics of routing policies: every policy's decision branches (ours), the cache-aware
 * prediction check (ours), SMG's per-policy branch counters, sticky keys, and the cache-aware
 * trees' match ratio (ours), sizes and placements.
 */

import type { FastCounter, FastGauge, FastHistogram } from "./fast.ts";
import { type FamilyBuilder, PREDICTION_ERROR_BUCKETS, RATIO_BUCKETS } from "./families.ts";

/** Routing policy metrics. */
export interface PolicyMetrics {
  /** smg_policy_decisions_total{policy,branch} (ours: every policy's branch) */
  readonly policyDecisions: FastCounter;
  /**
   * smg_policy_cache_prediction_error{policy} (ours): reported minus predicted cached share of
   * the prompt, per request whose policy predicted one (cache_aware).
   */
  readonly cachePredictionError: FastHistogram;
  /** smg_policy_cached_tokens_total{policy,source} (ours): predicted and reported cached tokens. */
  readonly cachedTokens: FastCounter;
  /** smg_manual_policy_branch_total{branch} (manual and sticky sessions) */
  readonly manualBranch: FastCounter;
  /** smg_consistent_hashing_policy_branch_total{branch} */
  readonly consistentHashingBranch: FastCounter;
  /** smg_prefix_hash_policy_branch_total{branch} */
  readonly prefixHashBranch: FastCounter;
  /** smg_manual_policy_cache_entries */
  readonly stickyEntries: FastGauge;
  /** smg_routing_key_source_total{source} */
  readonly routingKeySource: FastCounter;
  /** smg_worker_routing_keys_active{worker} */
  readonly routingKeysActive: FastGauge;
  /** smg_cache_aware_match_ratio{policy} (ours): matched share of each request's prefix */
  readonly matchRatio: FastHistogram;
  /** smg_cache_tree_chars{model} */
  readonly treeChars: FastGauge;
  /** smg_cache_tree_tokens{model} */
  readonly treeTokens: FastGauge;
  /** smg_cache_tree_tenants{model,tree} */
  readonly treeTenants: FastGauge;
  /** smg_cache_placement_entries{model} */
  readonly placements: FastGauge;
  /** smg_cache_tree_corrections_total{model,tree} (ours): answers that trimmed a worker's branch */
  readonly treeCorrections: FastCounter;
  /** smg_cache_tree_forgotten_total{model,tree} (ours): units those corrections removed */
  readonly treeForgotten: FastCounter;
  /** smg_kv_event_subscription_failures_total{worker,reason}: KV-event streams that failed */
  readonly kvFailures: FastCounter;
  /** smg_kv_event_batches_total{worker} (ours): KV-event batches applied */
  readonly kvBatches: FastCounter;
  /** smg_kv_index_blocks{model} (ours): blocks the KV-event index holds */
  readonly kvIndexBlocks: FastGauge;
  /**
   * smg_policy_chars_per_token{model,source} (ours): characters of routing text per token that
   * text-routed requests of a model are routed with (source: answers, peers or default)
   */
  readonly modelCharsPerToken: FastGauge;
  /** smg_worker_chars_per_token{worker} (ours): a worker's own, from its answers */
  readonly workerCharsPerToken: FastGauge;
}

/** Registers these metrics with `f`, in the order they are exposed. */
export function policyMetrics(f: FamilyBuilder): PolicyMetrics {
  return {
    policyDecisions: f.counter(
      "smg_policy_decisions_total",
      "Routing decisions by policy and branch",
      [
        "policy",
        "branch",
      ],
    ),
    cachePredictionError: f.hist(
      "smg_policy_cache_prediction_error",
      "Cached share of the prompt the worker reported minus the share the policy predicted",
      ["policy"],
      PREDICTION_ERROR_BUCKETS,
    ),
    cachedTokens: f.counter(
      "smg_policy_cached_tokens_total",
      "Prompt tokens a policy predicted the worker to find cached, and what the worker reported",
      ["policy", "source"],
    ),
    manualBranch: f.counter(
      "smg_manual_policy_branch_total",
      "manual / sticky-session decisions",
      [
        "branch",
      ],
    ),
    consistentHashingBranch: f.counter(
      "smg_consistent_hashing_policy_branch_total",
      "consistent_hashing decisions",
      ["branch"],
    ),
    prefixHashBranch: f.counter(
      "smg_prefix_hash_policy_branch_total",
      "prefix_hash decisions",
      [
        "branch",
      ],
    ),
    stickyEntries: f.gauge("smg_manual_policy_cache_entries", "Keys held by the sticky map"),
    routingKeySource: f.counter(
      "smg_routing_key_source_total",
      "Sticky keys by where they came from",
      [
        "source",
      ],
    ),
    routingKeysActive: f.gauge(
      "smg_worker_routing_keys_active",
      "Distinct sticky keys in flight per worker",
      [
        "worker",
      ],
    ),
    matchRatio: f.hist(
      "smg_cache_aware_match_ratio",
      "Share of each request's prefix found in the cache-aware tree",
      ["policy"],
      RATIO_BUCKETS,
    ),
    modelCharsPerToken: f.gauge(
      "smg_policy_chars_per_token",
      "Characters of routing text per token, learned per model from the answers' prompt_tokens",
      ["model", "source"],
    ),
    workerCharsPerToken: f.gauge(
      "smg_worker_chars_per_token",
      "Characters of routing text per token of a worker's answers",
      ["worker"],
    ),
    treeChars: f.gauge("smg_cache_tree_chars", "Characters in the cache-aware string tree", [
      "model",
    ]),
    treeTokens: f.gauge("smg_cache_tree_tokens", "Tokens in the cache-aware token tree", [
      "model",
    ]),
    treeTenants: f.gauge("smg_cache_tree_tenants", "Workers present in a cache-aware tree", [
      "model",
      "tree",
    ]),
    placements: f.gauge("smg_cache_placement_entries", "Keys in the cache-aware hash index", [
      "model",
    ]),
    treeCorrections: f.counter(
      "smg_cache_tree_corrections_total",
      "Answers whose reported cached tokens made a cache-aware tree forget part of a worker's branch",
      ["model", "tree"],
    ),
    treeForgotten: f.counter(
      "smg_cache_tree_forgotten_total",
      "Characters or tokens cache-aware trees forgot after workers reported less cached",
      ["model", "tree"],
    ),
    kvFailures: f.counter(
      "smg_kv_event_subscription_failures_total",
      "KV-event subscription failures by worker and reason",
      ["worker", "reason"],
    ),
    kvBatches: f.counter("smg_kv_event_batches_total", "KV-event batches applied by worker", [
      "worker",
    ]),
    kvIndexBlocks: f.gauge("smg_kv_index_blocks", "Blocks in the KV-event index by model", [
      "model",
    ]),
  };
}
