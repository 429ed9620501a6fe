/**
 * The references the routing benchmark computes on the same workload, in the same run, to judge
 * the policies against. `ref:upper-bound` serves both workloads; `ref:oracle` knows the synthetic
 * workload's tenants and `ref:affinity` a trace's conversations, so each is skipped (with a note)
 * on the other workload. A trace replay also reports the infinite-cache bound, computed offline
 * (`trace_bound.ts`).
 *
 * - `ref:upper-bound`: one simulated worker with the whole fleet's capacity, sent the workload
 *   directly (no gateway). It holds every tenant's prefixes in one cache of N × the KV tokens, so
 *   its cluster cache-hit rate bounds what any routing over N workers can reach. Its speeds are
 *   scaled so that each step does what N evenly loaded fleet workers do together in one step:
 *   `--prefill-chunk` and `--prefill-tps` × N (N × 2048 prompt tokens in the same 256 simulated
 *   ms), `--max-running` × N, `--decode-base-ms` unchanged and `--decode-per-req-ms` ÷ N (a step
 *   decoding N·b requests lasts base + per-req × b, as a fleet worker's step at batch b, so
 *   per-token time and decode throughput match the fleet's). It is still faster than the fleet
 *   for a lone long prompt (N × the prefill speed) and never idles a worker while another queues,
 *   so its TTFT is informative only. On a trace it is as sound as on the synthetic workload: it
 *   is sent the same requests, and nothing in it depends on tenants.
 * - `ref:oracle`: each tenant's traffic pinned to one worker, chosen by a balanced assignment of
 *   tenants to workers: greedy bin packing (largest first, onto the least loaded worker) of the
 *   tenants' expected prompt tokens per second, i.e. Zipf popularity × (system prompt + mean
 *   conversation history). The client reads each request's `X-Tenant-Id` and sets
 *   `X-SMG-Target-Worker` to that tenant's worker URL; our gateway with `--policy
 *   consistent_hashing` routes a request naming a target worker exactly there. So the oracle
 *   pays the same gateway hop as our policies, and only its routing knowledge differs. A trace
 *   has no tenants: the oracle is not defined there.
 * - `ref:affinity` (trace replay): every turn of a conversation on one worker. A trace names no
 *   conversations, so the key is read from the prefix trie of all the trace's block ids
 *   (`trace_keys.ts`): the block right after the deepest branch point on the request's path,
 *   i.e. where its conversation separated from the others (a path with no branch: its first
 *   block). Conversations sharing a system prompt get keys of their own; the turns of one
 *   conversation, each extending the previous, keep the key of the branch they share. Partial
 *   last blocks are left out of the trie, since each names its own request's exact tail (the
 *   next turn fills that block and gives it another id). The client sends the key as
 *   `X-SMG-Routing-Key` and our gateway with `--policy consistent_hashing` hashes it onto its
 *   ring: the same hop as our policies, with the knowledge of who continues whom. On the
 *   synthetic workload every request already carries its conversation id as that header, so
 *   `ref:affinity` there would be `smg:consistent_hashing`, and is skipped.
 */

import type { Session, Workload } from "./workload.ts";
import { simTokens } from "./workload.ts";

/** The references, by target suffix, with what each is (for the report). */
export const REFERENCES = {
  "upper-bound":
    "one sim worker with the fleet's combined capacity (kv-tokens, max-running, prefill-chunk, prefill-tps × N; decode-per-req-ms ÷ N), sent the workload directly",
  oracle:
    "each tenant pinned to one worker (greedy bin packing of expected load); our gateway --policy consistent_hashing, the client sets X-SMG-Target-Worker from X-Tenant-Id",
  affinity:
    "every turn of a conversation on one worker: our gateway --policy consistent_hashing, the client sets X-SMG-Routing-Key to the request's conversation key (the block after the deepest branch of its path in the trace's prefix trie)",
} as const;

/** References that need one workload, with the reason each is skipped on the other. */
export const REFERENCE_WORKLOAD: Partial<
  Record<Reference, { only: "synthetic" | "trace"; why: string }>
> = {
  oracle: {
    only: "synthetic",
    why:
      "pins the synthetic workload's tenants, and a trace has none (ref:affinity keys its conversations)",
  },
  affinity: {
    only: "trace",
    why:
      "keys a trace's conversations; the synthetic requests carry their conversation id as X-SMG-Routing-Key already, so it would be smg:consistent_hashing",
  },
};

/** A reference name. */
export type Reference = keyof typeof REFERENCES;

/** Engine flags scaled for `ref:upper-bound`: multiplied by N, or divided by N. */
const TIMES_N = ["--kv-tokens", "--max-running", "--prefill-chunk", "--prefill-tps"];
const OVER_N = ["--decode-per-req-ms"];

/**
 * `knobs` (sim-worker flags, as given to every fleet worker) with every occurrence of the capacity
 * and speed flags scaled for one worker standing in for `n`. Throws if one of them is missing,
 * since the engine default would then go unscaled.
 */
export function upperBoundKnobs(knobs: string[], n: number): string[] {
  const out = [...knobs];
  const seen = new Set<string>();
  const scale = (flag: string, v: string): string => {
    const x = Number(v);
    if (!Number.isFinite(x)) throw new Error(`ref:upper-bound: ${flag} ${v} is not a number`);
    seen.add(flag);
    return String(TIMES_N.includes(flag) ? x * n : Math.round((x / n) * 1e6) / 1e6);
  };
  for (let i = 0; i < out.length; i++) {
    const [flag, inline] = out[i].split(/=(.*)/s, 2);
    if (!TIMES_N.includes(flag) && !OVER_N.includes(flag)) continue;
    if (inline !== undefined) out[i] = `${flag}=${scale(flag, inline)}`;
    else if (i + 1 < out.length) out[i + 1] = scale(flag, out[++i]);
  }
  const missing = [...TIMES_N, ...OVER_N].filter((f) => !seen.has(f));
  if (missing.length) throw new Error(`ref:upper-bound: no ${missing.join(", ")} in the knobs`);
  return out;
}

/** Mean prompt tokens per request beyond the system prompt (user turns and replies so far). */
export function meanHistoryTokens(w: Workload): number {
  const c = w.config;
  const user = (c.userTokens[0] + c.userTokens[1]) / 2;
  const reply = (c.outputTokens[0] + c.outputTokens[1]) / 2;
  // Σ over turns t = 0..n-1 of (t + 1) user messages and t replies, averaged over n.
  let conv = 0;
  const span = c.turns[1] - c.turns[0] + 1;
  for (let n = c.turns[0]; n <= c.turns[1]; n++) {
    conv += (user * n * (n + 1) / 2 + reply * n * (n - 1) / 2) / span;
  }
  return (c.oneOffShare * user + (1 - c.oneOffShare) * conv) / w.meanTurns();
}

/** The oracle's plan: a worker index per tenant and each worker's share of the expected load. */
export interface OracleAssignment {
  /** Worker index (0-based, fleet start order) of each tenant. */
  worker: number[];
  /** Each worker's share of the expected prompt tokens (sums to 1). */
  share: number[];
}

/** Greedy bin packing of the tenants' expected prompt tokens onto `n` workers. */
export function oracleAssignment(w: Workload, n: number): OracleAssignment {
  const history = meanHistoryTokens(w);
  const cpt = w.config.charsPerToken;
  const load = w.tenants.map((t) => w.popularity(t.index) * (simTokens(t.system, cpt) + history));
  const order = load.map((_, k) => k).sort((a, b) => load[b] - load[a] || a - b);
  const bins = new Array<number>(n).fill(0);
  const worker = new Array<number>(load.length).fill(0);
  for (const k of order) {
    const i = bins.indexOf(Math.min(...bins));
    worker[k] = i;
    bins[i] += load[k];
  }
  const total = bins.reduce((a, b) => a + b, 0);
  return { worker, share: bins.map((b) => b / total) };
}

/**
 * The oracle's routing as extra request headers: `X-SMG-Target-Worker` = the URL of the worker
 * that the request's `X-Tenant-Id` is assigned to (`urls` in fleet start order).
 */
export function oracleRoute(
  plan: OracleAssignment,
  urls: string[],
): (s: Session, planned: Record<string, string>) => Record<string, string> {
  return (_s, planned) => {
    const tenant = Number(planned["x-tenant-id"]);
    const i = plan.worker[tenant];
    if (i === undefined) throw new Error(`ref:oracle: no worker for tenant '${tenant}'`);
    return { "x-smg-target-worker": urls[i] };
  };
}

/** `ref:affinity`'s routing as extra request headers: request i's conversation key. */
export function affinityRoute(keys: readonly string[]): (i: number) => Record<string, string> {
  return (i) => {
    const key = keys[i];
    if (key === undefined) throw new Error(`ref:affinity: no conversation key for request ${i}`);
    return { "x-smg-routing-key": key };
  };
}
