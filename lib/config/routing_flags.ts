/**
 * The routing flags of the gateway's flag table (`flags.ts`): policy choice and tuning, sticky
 * sessions, cache_aware's trees, gate and pressure knobs, and PD disaggregation. Same shape as
 * the rest of the table; split out for size.
 */

import { ASSIGNMENT_MODES, CACHE_AWARE_SCORINGS, POLICY_NAMES, WAIT_MODELS } from "./config.ts";
import type { FlagSpec } from "./flags.ts";

/** The routing flags, in --help order. */
export const ROUTING_FLAGS: FlagSpec[] = [
  // Policies.
  {
    name: "routing-key-override",
    kind: "bool",
    aliases: ["sticky-sessions"],
    help: "pin conversations (body rid, else routing key) on top of the policy",
    apply: (c, v) => (c.routingKeyOverride = v),
  },
  {
    name: "eviction-interval",
    kind: "int",
    help: "seconds between sweeps of idle sticky keys and cache entries",
    apply: (c, v) => (c.evictionIntervalSecs = v),
    shown: (d) => d.evictionIntervalSecs,
  },
  {
    name: "cache-boundaries",
    kind: "intlist",
    help: "token depths for prefix keys, comma-separated and ascending",
    apply: (c, v) => (c.cacheBoundaries = v),
  },
  {
    name: "wait-model",
    kind: { choices: WAIT_MODELS },
    help:
      "least_load, power_of_two, cache_aware misses: rank by prefill backlog (backlog) or SMG's queued tokens / throughput (smg)",
    apply: (c, v) => (c.leastLoad.waitModel = v),
    shown: (d) => d.leastLoad.waitModel,
  },
  {
    name: "least-load-kv-pressure-weight",
    kind: "float",
    help: "least_load: seconds scale of the KV-usage penalty",
    apply: (c, v) => (c.leastLoad.kvPressureWeight = v),
    shown: (d) => d.leastLoad.kvPressureWeight,
  },
  {
    name: "least-load-default-throughput",
    kind: "float",
    help: "least_load: tokens/s when a worker reports none",
    apply: (c, v) => (c.leastLoad.defaultThroughput = v),
    shown: (d) => d.leastLoad.defaultThroughput,
  },
  {
    name: "least-load-mean-prefill-tokens",
    kind: "int",
    help: "least_load: tokens per waiting request without token counts",
    apply: (c, v) => (c.leastLoad.meanPrefillTokens = v),
    shown: (d) => d.leastLoad.meanPrefillTokens,
  },
  {
    name: "least-load-max-waiting-requests",
    kind: "int",
    help: "least_load: skip workers with this many waiting requests (0: off)",
    apply: (c, v) => (c.leastLoad.maxWaitingRequests = v),
    shown: (d) => d.leastLoad.maxWaitingRequests,
  },
  {
    name: "prefix-token-count",
    kind: "int",
    help: "prefix_hash: leading tokens hashed (4x characters without token ids)",
    apply: (c, v) => (c.prefixHash.prefixTokenCount = v),
    shown: (d) => d.prefixHash.prefixTokenCount,
  },
  {
    name: "prefix-hash-load-factor",
    kind: "float",
    help: "prefix_hash: leave the ring worker above this x average in-flight",
    apply: (c, v) => (c.prefixHash.loadFactor = v),
    shown: (d) => d.prefixHash.loadFactor,
  },
  {
    name: "prefix-hash-balance-abs-threshold",
    kind: "int",
    help: "prefix_hash: ...and above average + this many requests",
    apply: (c, v) => (c.prefixHash.balanceAbsThreshold = v),
    shown: (d) => d.prefixHash.balanceAbsThreshold,
  },
  {
    name: "assignment-mode",
    kind: { choices: ASSIGNMENT_MODES },
    help: "manual/sticky: placement of a key not pinned yet (manual: random; sticky: delegate)",
    apply: (c, v) => (c.manual.assignmentMode = v),
  },
  {
    name: "max-idle-secs",
    kind: "int",
    aliases: ["sticky-key-idle-secs"],
    help: "manual/sticky: forget a key idle this long (0: never)",
    apply: (c, v) => (c.manual.maxIdleSecs = v),
    shown: (d) => d.manual.maxIdleSecs,
  },
  // cache_aware.
  {
    name: "cache-threshold",
    kind: "float",
    aliases: ["cache-match-threshold"],
    help: "cache_aware: match share above which the holder is preferred",
    apply: (c, v) => (c.cacheAware.cacheThreshold = v),
    shown: (d) => d.cacheAware.cacheThreshold,
  },
  {
    name: "balance-abs-threshold",
    kind: "int",
    aliases: ["spill-abs-threshold"],
    help: "cache_aware/bucket: spill when the holder is this many requests above average...",
    apply: (c, v) => (c.cacheAware.balanceAbsThreshold = v),
    shown: (d) => d.cacheAware.balanceAbsThreshold,
  },
  {
    name: "balance-rel-threshold",
    kind: "float",
    aliases: ["spill-rel-threshold"],
    help: "cache_aware/bucket: ...and this multiple of average",
    apply: (c, v) => (c.cacheAware.balanceRelThreshold = v),
    shown: (d) => d.cacheAware.balanceRelThreshold,
  },
  {
    name: "balance-token-usage-threshold",
    kind: "float",
    help: "cache_aware: KV usage spread that overrides affinity (1.0: off)",
    apply: (c, v) => (c.cacheAware.balanceTokenUsageThreshold = v),
    shown: (d) => d.cacheAware.balanceTokenUsageThreshold,
  },
  {
    name: "overload-token-usage-threshold",
    kind: "float",
    help: "cache_aware: KV usage on any worker that overrides affinity (1.0: off)",
    apply: (c, v) => (c.cacheAware.overloadTokenUsageThreshold = v),
    shown: (d) => d.cacheAware.overloadTokenUsageThreshold,
  },
  {
    name: "overlap-decay",
    kind: "float",
    help: "cache_aware: discount holders by queued uncached tokens (0: off)",
    apply: (c, v) => (c.cacheAware.overlapDecay = v),
    shown: (d) => d.cacheAware.overlapDecay,
  },
  {
    name: "selection-temperature",
    kind: "float",
    help: "cache_aware: softmax temperature over holders (0: argmax)",
    apply: (c, v) => (c.cacheAware.selectionTemperature = v),
    shown: (d) => d.cacheAware.selectionTemperature,
  },
  {
    name: "max-tree-size",
    kind: "int",
    help: "cache_aware: tree budget in characters or tokens, all workers together",
    apply: (c, v) => (c.cacheAware.maxTreeSize = v),
    shown: (d) => d.cacheAware.maxTreeSize,
  },
  {
    name: "block-size",
    kind: "int",
    help: "cache_aware: tokens per page of the token tree",
    apply: (c, v) => (c.cacheAware.blockSize = v),
    shown: (d) => d.cacheAware.blockSize,
  },
  {
    name: "cache-index",
    kind: { choices: ["tree", "hash"] },
    help: "cache_aware: radix trees, or hashed heads at --cache-boundaries",
    apply: (c, v) => (c.cacheAware.cacheIndex = v),
    shown: (d) => d.cacheAware.cacheIndex,
  },
  {
    name: "cache-aware-scoring",
    kind: { choices: CACHE_AWARE_SCORINGS },
    help:
      "cache_aware: pick the cheapest (cost: 2 x uncached tokens + prefill backlog) or SMG's threshold and balance gate (smg)",
    apply: (c, v) => (c.cacheAware.scoring = v),
    shown: (d) => d.cacheAware.scoring,
  },
  {
    name: "cache-ttl-secs",
    kind: "int",
    help: "cache_aware hash index: seconds a placement lives without use",
    apply: (c, v) => (c.cacheAware.cacheTtlSecs = v),
    shown: (d) => d.cacheAware.cacheTtlSecs,
  },
  // Prefill/decode disaggregation (`--prefill URL [PORT]` and `--decode URL` are read by cli.ts).
  {
    name: "pd-disaggregation",
    kind: "bool",
    help: "send each request to a prefill and a decode worker (--prefill URL [PORT], --decode URL)",
    apply: (c, v) => (c.pd.enabled = v),
  },
  {
    name: "prefill-policy",
    kind: { choices: POLICY_NAMES },
    help: "policy of the prefill leg (default: --policy)",
    apply: (c, v) => (c.pd.prefillPolicy = v),
  },
  {
    name: "decode-policy",
    kind: { choices: POLICY_NAMES },
    help: "policy of the decode leg (default: --policy)",
    apply: (c, v) => (c.pd.decodePolicy = v),
  },
];
