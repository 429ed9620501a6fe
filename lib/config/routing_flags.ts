/**
 * The routing flags, declared once (see `flag.ts`): sticky sessions and prefix keys, the tuning
 * of least_load, prefix_hash, manual and cache_aware, and PD disaggregation. The checks that
 * join several of them (e.g. `--cache-index hash` needs `--cache-boundaries`) are in
 * `validate.ts`.
 */

import { badValue } from "../core/errors.ts";
import { atLeast, must } from "./checks.ts";
import type { Check, Declarations, Flags } from "./flag.ts";
import { bool, choices, float, int, intList } from "./kinds.ts";
import {
  ASSIGNMENT_MODES,
  CACHE_AWARE_SCORINGS,
  type CacheAwareConfig,
  type LeastLoadConfig,
  type ManualConfig,
  type PdConfig,
  POLICY_NAMES,
  type PrefixHashConfig,
  WAIT_MODELS,
} from "./types.ts";

/** Positive and strictly ascending. */
const boundaries: Check<number[]> = (flag, b) => {
  if (b.length > 0 && b[0] <= 0) throw badValue(flag, b, "Boundaries must be > 0");
  for (let i = 1; i < b.length; i++) {
    if (b[i] <= b[i - 1]) throw badValue(flag, b, "Boundaries must be strictly ascending");
  }
  return b;
};

/** A finite number of at least 0, with SMG's message and what 0 means. */
const finiteAtLeastZero = (zero = ""): Check<number> =>
  must((v) => Number.isFinite(v) && v >= 0, `Must be finite and >= 0.0${zero}`);

/** A KV-usage threshold where 1.0 and above turn the rule off. */
const usageThreshold: Check<number> = must((v) => v > 0, "Must be > 0.0 (use >= 1.0 to disable)");

/** The routing flags' top-level fields, in --help order. */
export const ROUTING_FLAGS = {
  routingKeyOverride: {
    name: "routing-key-override",
    aliases: ["sticky-sessions"],
    kind: bool,
    default: false,
    help: "pin conversations (body rid, else routing key) on top of the policy",
  },
  evictionIntervalSecs: {
    name: "eviction-interval",
    kind: int,
    default: 120,
    help: "seconds between sweeps of idle sticky keys and cache entries",
    check: atLeast(0),
  },
  cacheBoundaries: {
    name: "cache-boundaries",
    kind: intList,
    default: [],
    help: "token depths for prefix keys, comma-separated and ascending",
    check: boundaries,
  },
} satisfies Partial<Declarations>;

/** least_load (and the wait model of power_of_two and cache_aware), in --help order. */
export const LEAST_LOAD_FLAGS: Flags<LeastLoadConfig> = {
  waitModel: {
    name: "wait-model",
    kind: choices(WAIT_MODELS),
    default: "backlog",
    help:
      "least_load, power_of_two, cache_aware misses: rank by prefill backlog (backlog) or SMG's queued tokens / throughput (smg)",
  },
  kvPressureWeight: {
    name: "least-load-kv-pressure-weight",
    kind: float,
    default: 0.15,
    help: "least_load: seconds scale of the KV-usage penalty",
    check: finiteAtLeastZero(),
  },
  defaultThroughput: {
    name: "least-load-default-throughput",
    kind: float,
    default: 2000,
    help: "least_load: tokens/s when a worker reports none",
    check: must((v) => Number.isFinite(v) && v > 0, "Must be finite and > 0.0"),
  },
  meanPrefillTokens: {
    name: "least-load-mean-prefill-tokens",
    kind: int,
    default: 1024,
    help: "least_load: tokens per waiting request without token counts",
    check: atLeast(1),
  },
  maxWaitingRequests: {
    name: "least-load-max-waiting-requests",
    kind: int,
    default: 0,
    help: "least_load: skip workers with this many waiting requests (0: off)",
    check: atLeast(0),
  },
};

/** prefix_hash, in --help order. */
export const PREFIX_HASH_FLAGS: Flags<PrefixHashConfig> = {
  prefixTokenCount: {
    name: "prefix-token-count",
    kind: int,
    default: 256,
    help: "prefix_hash: leading tokens hashed (of text: at the learned characters per token)",
    check: atLeast(1),
  },
  loadFactor: {
    name: "prefix-hash-load-factor",
    kind: float,
    default: 1.25,
    help: "prefix_hash: leave the ring worker above this x average in-flight",
    check: atLeast(1),
  },
  balanceAbsThreshold: {
    name: "prefix-hash-balance-abs-threshold",
    kind: int,
    default: 10,
    help: "prefix_hash: ...and above average + this many requests",
    check: atLeast(0),
  },
};

/** manual and sticky sessions, in --help order. */
export const MANUAL_FLAGS: Flags<ManualConfig> = {
  assignmentMode: {
    name: "assignment-mode",
    kind: choices(ASSIGNMENT_MODES),
    default: null,
    help: "manual/sticky: placement of a key not pinned yet (manual: random; sticky: delegate)",
  },
  maxIdleSecs: {
    name: "max-idle-secs",
    aliases: ["sticky-key-idle-secs"],
    kind: int,
    default: 14400,
    help: "manual/sticky: forget a key idle this long (0: never)",
    check: atLeast(0),
  },
};

/** cache_aware, in --help order. */
export const CACHE_AWARE_FLAGS: Flags<CacheAwareConfig> = {
  cacheThreshold: {
    name: "cache-threshold",
    aliases: ["cache-match-threshold"],
    kind: float,
    default: 0.3,
    help:
      "cache_aware (--cache-aware-scoring smg): match share above which the holder is preferred",
    check: must((v) => v >= 0 && v <= 1, "Must be between 0.0 and 1.0"),
  },
  balanceAbsThreshold: {
    name: "balance-abs-threshold",
    aliases: ["spill-abs-threshold"],
    kind: int,
    default: 64,
    help: "cache_aware/bucket: spill when the holder is this many requests above average...",
    check: atLeast(0),
  },
  balanceRelThreshold: {
    name: "balance-rel-threshold",
    aliases: ["spill-rel-threshold"],
    kind: float,
    default: 1.5,
    help: "cache_aware/bucket: ...and this multiple of average",
    check: atLeast(1),
  },
  balanceTokenUsageThreshold: {
    name: "balance-token-usage-threshold",
    kind: float,
    default: 1.0,
    help: "cache_aware: KV usage spread that overrides affinity (1.0: off)",
    check: usageThreshold,
  },
  overloadTokenUsageThreshold: {
    name: "overload-token-usage-threshold",
    kind: float,
    default: 1.0,
    help: "cache_aware: KV usage on any worker that overrides affinity (1.0: off)",
    check: usageThreshold,
  },
  overlapDecay: {
    name: "overlap-decay",
    kind: float,
    default: 0,
    help: "cache_aware: discount holders by queued uncached tokens (0: off)",
    check: finiteAtLeastZero(" (0.0 disables)"),
  },
  selectionTemperature: {
    name: "selection-temperature",
    kind: float,
    default: 0,
    help: "cache_aware: softmax temperature over holders (0: argmax)",
    check: finiteAtLeastZero(" (0.0 is argmax)"),
  },
  maxTreeSize: {
    name: "max-tree-size",
    kind: int,
    default: 2 ** 26,
    help: "cache_aware: tree budget in characters or tokens, all workers together",
    check: atLeast(1),
  },
  blockSize: {
    name: "block-size",
    kind: int,
    default: 16,
    help: "cache_aware: tokens per page of the token tree",
    check: atLeast(1),
  },
  cacheIndex: {
    name: "cache-index",
    kind: choices(["tree", "hash"]),
    default: "tree",
    help: "cache_aware: radix trees, or hashed heads at --cache-boundaries",
  },
  scoring: {
    name: "cache-aware-scoring",
    kind: choices(CACHE_AWARE_SCORINGS),
    default: "cost",
    help:
      "cache_aware: pick the cheapest (cost: 2 x uncached tokens + prefill backlog) or SMG's threshold and balance gate (smg)",
  },
  workWeight: {
    name: "cache-aware-work-weight",
    kind: float,
    default: 0.1,
    help:
      "cache_aware (cost): tokens of cost per token of recent uncached work a worker was sent above the least sent (0: off)",
    check: finiteAtLeastZero(),
  },
  workHorizonSecs: {
    name: "cache-aware-work-horizon-secs",
    kind: float,
    default: 30,
    help: "cache_aware (cost): time constant of the recent uncached work, seconds",
    check: must((v) => Number.isFinite(v) && v > 0, "Must be > 0"),
  },
  cacheTtlSecs: {
    name: "cache-ttl-secs",
    kind: int,
    default: 180,
    help: "cache_aware hash index: seconds a placement lives without use",
    check: atLeast(1),
  },
  kvEvents: {
    name: "kv-events",
    kind: choices(["auto", "off"]),
    default: "auto",
    help:
      "cache_aware: route on workers' KV cache events (gRPC workers, HTTP workers labelled kv_events=tcp://host:port)",
  },
  treeFeedback: {
    name: "tree-feedback",
    kind: choices(["on", "off"]),
    default: "on",
    help:
      "cache_aware: forget a worker's stale branches when its answer reports less cached (mesh peers too), and keep its tree within its stated KV capacity",
  },
  kvIndexerTtlSecs: {
    name: "kv-indexer-ttl-secs",
    kind: int,
    default: 0,
    help: "KV-event index: prune blocks neither stored nor read for this long (0: off)",
    check: atLeast(0),
  },
  kvIndexerMaxEntries: {
    name: "kv-indexer-max-entries",
    kind: int,
    default: 0,
    help: "KV-event index: most blocks per model before the oldest are pruned (0: off)",
    check: atLeast(0),
  },
};

/** Prefill/decode disaggregation, in --help order. */
export const PD_FLAGS: Flags<PdConfig> = {
  enabled: {
    name: "pd-disaggregation",
    kind: bool,
    default: false,
    help: "send each request to a prefill and a decode worker (--prefill URL [PORT], --decode URL)",
  },
  // `--prefill URL [PORT]` and `--decode URL` take an optional second value, which commander
  // cannot read: cli.ts reads them, validate.ts checks them.
  prefill: { default: [] },
  decode: { default: [] },
  prefillPolicy: {
    name: "prefill-policy",
    kind: choices(POLICY_NAMES),
    default: null,
    help: "policy of the prefill leg (default: --policy)",
  },
  decodePolicy: {
    name: "decode-policy",
    kind: choices(POLICY_NAMES),
    default: null,
    help: "policy of the decode leg (default: --policy)",
  },
};
